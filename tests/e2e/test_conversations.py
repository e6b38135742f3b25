"""Managing conversations in the browser, and what one user can see of another's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.models import Conversation, Message
from agents.services.conversations import conversation_create
from tests.e2e.test_chat import ask, calculator_script

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def conversation_with(owner, title: str, *texts: str) -> Conversation:
    """A conversation holding these user messages (no runs: this is about the list)."""
    conversation = conversation_create(owner=owner, title=title)
    for text in texts:
        Message.objects.create(conversation=conversation, role="user", content=text)
    return conversation


def sidebar_titles(page) -> list[str]:
    return page.locator("#conversation-list .conversation-link").all_inner_texts()


def test_rename_search_export_and_delete(open_tab, user):
    trip = conversation_with(user, "Untitled", "Plan three days in Lisbon")
    conversation_with(user, "Cakes", "Which pastel de nata is best?")
    tab = open_tab(user, path=f"/c/{trip.pk}/")
    page = tab.page
    expect(page.locator("#conversation-list .conversation-link")).to_have_count(2)

    # Rename
    page.get_by_role("button", name="Rename").click()
    dialog = page.get_by_role("dialog", name="Rename conversation")
    dialog.get_by_label("Title").fill("Lisbon trip")
    dialog.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Lisbon trip")
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("button", name="Rename")).to_be_focused()
    expect(page.get_by_role("link", name="Lisbon trip")).to_have_attribute("aria-current", "page")
    trip.refresh_from_db()
    assert trip.title == "Lisbon trip"

    # Search by content, then by title
    search = page.get_by_role("searchbox", name="Search conversations by title or content")
    search.fill("pastel")
    expect(page.locator("#conversation-list .conversation-link")).to_have_text(["Cakes"])
    search.fill("lisbon")
    expect(page.locator("#conversation-list .conversation-link")).to_have_text(["Lisbon trip"])
    search.fill("nothing like this")
    expect(page.get_by_text("No conversations match.")).to_be_visible()
    search.fill("")
    expect(page.locator("#conversation-list .conversation-link")).to_have_count(2)

    # Export as Markdown and as JSON
    page.get_by_text("More", exact=True).click()
    with page.expect_download() as markdown:
        page.get_by_role("link", name="Export as Markdown").click()
    text = Path(markdown.value.path()).read_text(encoding="utf-8")
    assert text.startswith("# Lisbon trip\n")
    assert "Plan three days in Lisbon" in text
    page.get_by_text("More", exact=True).click()
    with page.expect_download() as as_json:
        page.get_by_role("link", name="Export as JSON").click()
    data = json.loads(Path(as_json.value.path()).read_text(encoding="utf-8"))
    assert data["title"] == "Lisbon trip"
    assert [m["content"] for m in data["messages"]] == ["Plan three days in Lisbon"]

    # Delete from the header: at once, with Undo, as from the list's ⋯ menu.
    toast = page.locator("#sidebar-toast")
    page.get_by_text("More", exact=True).click()
    page.get_by_role("button", name="Delete", exact=True).click()
    expect(toast).to_contain_text("Deleted “Lisbon trip”.")
    expect(page.locator("#conversation-list .conversation-link")).to_have_text(["Cakes"])
    page.get_by_role("button", name="Undo").click()
    expect(toast).to_be_hidden()
    expect(page.locator("#conversation-list .conversation-link")).to_have_count(2)
    assert Conversation.objects.filter(pk=trip.pk).exists()
    # Once the toast runs out it is gone for good, and the page goes to a new chat.
    page.get_by_text("More", exact=True).click()
    page.get_by_role("button", name="Delete", exact=True).click()
    expect(toast).to_contain_text("Deleted “Lisbon trip”.")
    expect(page).to_have_url(f"{page.url.split('/c/')[0]}/")
    # The new page's script draws the list: wait for it rather than read it at once.
    expect(page.locator("#conversation-list .conversation-link")).to_have_text(["Cakes"])
    assert not Conversation.objects.filter(pk=trip.pk).exists()
    assert tab.errors == []


def test_archive_from_the_header_with_undo_then_restore(open_tab, user):
    old = conversation_with(user, "Old notes", "remember the milk")
    tab = open_tab(user, path=f"/c/{old.pk}/")
    page = tab.page
    toast = page.locator("#sidebar-toast")
    # Archive from the header: at once, with Undo, as from the list's ⋯ menu.
    page.get_by_text("More", exact=True).click()
    page.get_by_role("button", name="Archive").click()
    expect(toast).to_contain_text("Archived “Old notes”.")
    expect(page.locator("#conversation-list .conversation-link")).to_have_count(0)
    old.refresh_from_db()
    assert old.archived
    page.get_by_role("button", name="Undo").click()
    expect(page.locator("#conversation-list .conversation-link")).to_have_text(["Old notes"])
    old.refresh_from_db()
    assert not old.archived

    # Once the toast runs out, the page goes to a new chat.
    page.get_by_text("More", exact=True).click()
    page.get_by_role("button", name="Archive").click()
    expect(page.get_by_role("heading", name="What can I help with?")).to_be_visible()
    assert sidebar_titles(page) == []
    old.refresh_from_db()
    assert old.archived

    # Restore leads to the conversation, not back to a now empty list of archived ones.
    page.get_by_role("link", name="Archived conversations").click()
    page.get_by_role("button", name="Restore Old notes").click()
    expect(page).to_have_url(re.compile(rf"/c/{old.pk}/$"))
    expect(page.locator("#conversation-title")).to_have_text("Old notes")
    expect(page.locator("#conversation-list .conversation-link")).to_have_text(["Old notes"])
    expect(page.get_by_text("This conversation is archived")).to_have_count(0)
    assert tab.errors == []


def test_two_users_cannot_see_each_others_conversations(open_tab, user, other_user):
    alices = conversation_with(user, "Alice's plans", "the surprise party is on Friday")
    conversation_with(other_user, "Bob's list", "buy balloons")

    bob = open_tab(other_user).page
    expect(bob.locator("#conversation-list .conversation-link")).to_have_text(["Bob's list"])
    assert bob.goto(f"/c/{alices.pk}/").status == 404
    bob.goto("/")
    bob.get_by_role("searchbox").fill("surprise")
    expect(bob.get_by_text("No conversations match.")).to_be_visible()
    api_status = bob.evaluate(
        "async id => (await fetch(`/api/conversations/${id}/`)).status", alices.pk
    )
    assert api_status == 404
    close_code = bob.evaluate(
        """id => new Promise(resolve => {
            const ws = new WebSocket(`ws://${location.host}/ws/conversations/${id}/?after_seq=0`);
            ws.onmessage = () => resolve("got a frame");
            ws.onclose = event => resolve(event.code);
        })""",
        alices.pk,
    )
    assert close_code == 4404

    alice = open_tab(user).page
    expect(alice.locator("#conversation-list .conversation-link")).to_have_text(["Alice's plans"])


def test_two_tabs_stay_in_step(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, tools=("calculator",))
    stack.model.script(model_name, calculator_script())
    conversation = conversation_create(owner=user, profile=profile)
    first = open_tab(user, path=f"/c/{conversation.pk}/").page
    second = open_tab(user, path=f"/c/{conversation.pk}/").page

    ask(first, "What is 2 + 2?")
    for page in (first, second):
        expect(page.locator(".msg.user .bubble")).to_have_text(["What is 2 + 2?"])
        expect(page.locator(".answer strong")).to_have_text("4")
        expect(page.locator(".step")).to_have_count(4)
