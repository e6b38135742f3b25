"""The sidebar in the browser: ⋯ menu with Undo, pins, date buckets, running marker, snippets."""

from __future__ import annotations

import calendar
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from agents.models import AgentRun, Conversation
from tests.e2e.test_conversations import conversation_with

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def active_at(conversation: Conversation, when: datetime) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=when)


def titles(page) -> list[str]:
    return page.locator("#conversation-list .conversation-link-title").all_inner_texts()


def menu_button(page, title: str):
    return page.get_by_role("button", name=f"More actions for {title}")


def choose(page, title: str, action: str) -> None:
    menu_button(page, title).click()
    page.get_by_role("menu", name=title).get_by_role("menuitem", name=action).click()


def test_menu_is_keyboard_usable_and_renames(open_tab, user):
    conversation_with(user, "Alpha")
    tab = open_tab(user)
    page = tab.page
    button = menu_button(page, "Alpha")
    expect(button).to_have_attribute("aria-haspopup", "menu")
    expect(button).to_have_attribute("aria-expanded", "false")

    button.focus()
    page.keyboard.press("Enter")
    menu = page.get_by_role("menu", name="Alpha")
    expect(menu).to_be_visible()
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(menu.get_by_role("menuitem", name="Rename")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(menu.get_by_role("menuitem", name="Pin")).to_be_focused()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    expect(menu.get_by_role("menuitem", name="Delete")).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(button).to_be_focused()

    # Rename from the keyboard: Enter on the menu, Enter on Rename, type, Enter.
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    field = page.get_by_role("textbox", name="New title for Alpha")
    expect(field).to_be_focused()
    field.fill("Alpha <b>plans</b>")
    page.keyboard.press("Enter")
    expect(page.locator(".conversation-link-title")).to_have_text(["Alpha <b>plans</b>"])
    expect(menu_button(page, "Alpha <b>plans</b>")).to_be_focused()
    assert Conversation.objects.get(owner=user).title == "Alpha <b>plans</b>"

    # Escape while renaming changes nothing.
    choose(page, "Alpha <b>plans</b>", "Rename")
    page.get_by_role("textbox").last.fill("Never saved")
    page.keyboard.press("Escape")
    expect(page.locator(".conversation-link-title")).to_have_text(["Alpha <b>plans</b>"])
    assert Conversation.objects.get(owner=user).title == "Alpha <b>plans</b>"
    assert tab.errors == []


def test_archive_and_delete_offer_undo(open_tab, user):
    notes = conversation_with(user, "Notes", "milk")
    trip = conversation_with(user, "Trip", "Lisbon")
    tab = open_tab(user)
    page = tab.page
    toast = page.locator("#sidebar-toast")
    expect(page.locator(".conversation-link-title")).to_have_count(2)

    # Archive, then Undo: it comes back and is not archived.
    choose(page, "Notes", "Archive")
    expect(toast).to_contain_text("Archived “Notes”.")
    assert titles(page) == ["Trip"]
    notes.refresh_from_db()
    assert notes.archived
    page.get_by_role("button", name="Undo").click()
    expect(page.locator(".conversation-link-title")).to_have_text(["Trip", "Notes"])
    expect(toast).to_be_hidden()
    notes.refresh_from_db()
    assert not notes.archived

    # Delete, then Undo: nothing was sent, the conversation is still there.
    choose(page, "Trip", "Delete")
    expect(toast).to_contain_text("Deleted “Trip”.")
    expect(page.get_by_role("button", name="Undo")).to_be_focused()
    assert titles(page) == ["Notes"]
    page.get_by_role("button", name="Undo").click()
    expect(page.locator(".conversation-link-title")).to_have_text(["Trip", "Notes"])
    assert Conversation.objects.filter(pk=trip.pk).exists()

    # Delete and let the toast run out: only then is it deleted for good.
    choose(page, "Trip", "Delete")
    expect(toast).to_contain_text("Deleted “Trip”.")
    assert Conversation.objects.filter(pk=trip.pk).exists()
    with page.expect_response(
        lambda r: r.request.method == "DELETE" and f"/api/conversations/{trip.pk}/" in r.url
    ) as deleted:
        expect(toast).to_be_hidden()
    assert deleted.value.status == 204
    assert not Conversation.objects.filter(pk=trip.pk).exists()

    # Archive and let the toast run out: it stays archived, and a reload agrees.
    choose(page, "Notes", "Archive")
    expect(toast).to_contain_text("Archived “Notes”.")
    expect(toast).to_be_hidden()
    page.reload()
    expect(page.get_by_text("No conversations yet.")).to_be_visible()
    notes.refresh_from_db()
    assert notes.archived
    assert tab.errors == []


def test_a_second_action_settles_the_first_delete(open_tab, user):
    first = conversation_with(user, "First")
    conversation_with(user, "Second")
    page = open_tab(user).page
    choose(page, "First", "Delete")
    with page.expect_response(lambda r: r.request.method == "DELETE") as deleted:
        choose(page, "Second", "Archive")
    assert deleted.value.status == 204
    assert not Conversation.objects.filter(pk=first.pk).exists()
    expect(page.locator("#sidebar-toast")).to_contain_text("Archived “Second”.")


def test_pinned_chats_come_first_and_stay_after_reload(open_tab, user):
    now = timezone.now()
    old = conversation_with(user, "Old but important")
    new = conversation_with(user, "Fresh")
    active_at(old, now - timedelta(days=90))
    active_at(new, now)
    page = open_tab(user).page
    expect(page.locator(".conversation-link-title")).to_have_text(["Fresh", "Old but important"])

    choose(page, "Old but important", "Pin")
    pinned = page.locator(".conversation-group").first
    expect(pinned.get_by_role("heading")).to_have_text("Pinned")
    expect(pinned.locator(".conversation-link-title")).to_have_text(["Old but important"])
    expect(page.locator(".conversation-link-title")).to_have_text(["Old but important", "Fresh"])
    expect(menu_button(page, "Old but important")).to_be_focused()
    old.refresh_from_db()
    assert old.pinned_at is not None

    page.reload()
    expect(page.locator(".conversation-link-title")).to_have_text(["Old but important", "Fresh"])
    choose(page, "Old but important", "Unpin")
    expect(page.locator(".conversation-link-title")).to_have_text(["Fresh", "Old but important"])
    expect(page.get_by_role("heading", name="Pinned")).to_have_count(0)
    old.refresh_from_db()
    assert old.pinned_at is None


def test_date_buckets_follow_the_browsers_calendar(open_tab, user):
    page = open_tab(user).page
    zone = ZoneInfo(page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone"))
    today = timezone.now().astimezone(zone).date()

    def noon(days_ago: int) -> datetime:
        return datetime.combine(today - timedelta(days=days_ago), time(12), tzinfo=zone)

    def month_label(days_ago: int) -> str:
        day = today - timedelta(days=days_ago)
        return f"{calendar.month_name[day.month]} {day.year}"

    ages = {"Now": None, "Yesterday's": 1, "Last week's": 6, "Last month's": 25, "Older": 75}
    ages["Ancient"] = 400
    for title, days_ago in ages.items():
        conversation = conversation_with(user, title)
        active_at(conversation, timezone.now() if days_ago is None else noon(days_ago))
    page.reload()

    expected = [
        ("Today", ["Now"]),
        ("Yesterday", ["Yesterday's"]),
        ("Previous 7 days", ["Last week's"]),
        ("Previous 30 days", ["Last month's"]),
        (month_label(75), ["Older"]),
        (month_label(400), ["Ancient"]),
    ]
    groups = page.locator(".conversation-group")
    expect(groups.get_by_role("heading")).to_have_text([label for label, _ in expected])
    for index, (_, group_titles) in enumerate(expected):
        expect(groups.nth(index).locator(".conversation-link-title")).to_have_text(group_titles)


def test_a_conversation_with_a_run_going_is_marked(open_tab, user):
    busy = conversation_with(user, "Busy", "working on it")
    conversation_with(user, "Idle", "done")
    AgentRun.objects.create(
        conversation=busy,
        trigger_message=busy.messages.get(),
        status=AgentRun.Status.RUNNING,
        heartbeat_at=timezone.now(),
    )
    page = open_tab(user).page
    expect(page.get_by_role("link", name="Busy (answering)")).to_be_visible()
    expect(page.locator(".running-marker")).to_have_count(1)
    expect(page.get_by_role("link", name="Idle", exact=True)).to_be_visible()

    # Back in the tab after the run ended: the list is fetched again and the marker goes.
    AgentRun.objects.filter(conversation=busy).update(status=AgentRun.Status.SUCCEEDED)
    with page.expect_response(lambda r: "/api/conversations/?page_size=200" in r.url):
        page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(page.locator(".running-marker")).to_have_count(0)
    expect(page.get_by_role("link", name="Busy", exact=True)).to_be_visible()


def test_search_shows_a_highlighted_snippet_without_running_user_html(open_tab, user):
    hostile = "<b>x</b><img src=x onerror=__pwned=1>pastel de nata"
    conversation_with(user, "Cakes", hostile)
    conversation_with(user, "Other", "nothing to see")
    tab = open_tab(user)
    page = tab.page
    page.get_by_role("searchbox").fill("PASTEL")
    snippet = page.locator(".conversation-snippet")
    expect(snippet).to_have_count(1)
    expect(snippet.locator("mark")).to_have_text(["pastel"])
    expect(snippet).to_have_text(hostile)
    expect(page.get_by_role("link", name="Cakes")).to_have_attribute(
        "aria-describedby", snippet.get_attribute("id")
    )
    assert page.locator("#conversation-list img, #conversation-list b").count() == 0
    assert page.evaluate("window.__pwned") is None
    # A title-only match shows no snippet.
    page.get_by_role("searchbox").fill("other")
    expect(page.locator(".conversation-link-title")).to_have_text(["Other"])
    expect(page.locator(".conversation-snippet")).to_have_count(0)
    assert tab.errors == []
