"""Share a conversation: the owner makes a link in the menu, a second signed-in user reads
the conversation through it (code coloured, with Copy), and after the owner revokes it the
link is a 404 that says it was revoked."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.models import ConversationShare
from agents.services.conversations import conversation_create
from tests.answers import finished_answer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_shared_link_is_read_by_another_user_then_refused_after_revoke(
    stack, open_tab, user, other_user
):
    conversation = conversation_create(owner=user, title="Sums")
    finished_answer(
        conversation=conversation,
        question="What is 6 * 7?",
        answer="It is **42**.\n\n```python\nprint(6 * 7)\n```",
    )
    conversation_create(owner=user, title="Alice's private plans")

    owner = open_tab(user, path=f"/c/{conversation.pk}/")
    page = owner.page
    page.get_by_label("More actions for this conversation").click()
    page.get_by_role("button", name="Share…").click()
    dialog = page.get_by_role("dialog", name="Share this conversation")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Create link").click()
    link = dialog.get_by_label("Share link")
    expect(link).to_be_visible()
    expect(link).to_have_value(f"{stack.daphne.url}/s/{ConversationShare.objects.get().token}/")
    url = link.input_value()

    reader = open_tab(other_user, path=url).page
    expect(reader.get_by_role("heading", name="Sums")).to_be_visible()
    expect(reader.locator(".msg.user .bubble")).to_have_text("What is 6 * 7?")
    expect(reader.locator(".msg.assistant .answer strong")).to_have_text("42")
    reader.locator(".msg.assistant details.steps summary").click()
    expect(reader.locator(".step.action .tool-name")).to_have_text("calculator")
    expect(reader.get_by_text("Alice's private plans")).to_have_count(0)
    # Code is coloured as on the chat page, and its Copy works and says so.
    code = reader.locator(".answer pre code.language-python")
    expect(code.locator(".hljs-built_in")).to_have_text("print")
    reader.context.grant_permissions(["clipboard-read", "clipboard-write"])
    reader.get_by_role("button", name="Copy the code").click()
    expect(reader.locator("#announcer")).to_have_text("Copied")
    assert reader.evaluate("navigator.clipboard.readText()") == "print(6 * 7)\n"

    dialog.get_by_role("button", name="Revoke link").click()
    expect(dialog.get_by_role("status")).to_have_text("Link revoked. It no longer opens.")
    expect(dialog.get_by_role("button", name="Create link")).to_be_visible()
    response = reader.goto(url)
    assert response.status == 404
    expect(reader.get_by_role("heading", name="This link was revoked")).to_be_visible()
    expect(reader.get_by_text("What is 6 * 7?")).to_have_count(0)
    assert owner.errors == []
