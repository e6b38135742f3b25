"""Folders and the select mode in the browser, at desktop and phone widths (issue 42)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.models import Conversation, ConversationFolder
from tests.e2e.conftest import DESKTOP, MOBILE
from tests.e2e.test_accessibility import assert_accessible
from tests.e2e.test_conversations import conversation_with

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def open_list(tab, viewport) -> None:
    if viewport == MOBILE:
        tab.page.get_by_role("button", name="Open the conversation list").click()
    expect(tab.page.get_by_role("complementary", name="Conversations")).to_be_visible()


@pytest.mark.parametrize("viewport", [DESKTOP, MOBILE], ids=["desktop", "mobile"])
def test_folder_move_and_bulk_archive_with_undo(open_tab, user, viewport):
    notes = conversation_with(user, "Notes")
    trip = conversation_with(user, "Trip")
    budget = conversation_with(user, "Budget")
    tab = open_tab(user, viewport=viewport)
    page = tab.page
    open_list(tab, viewport)

    # A new folder from the keyboard: its name, Enter.
    page.get_by_role("button", name="New folder").click()
    field = page.get_by_role("textbox", name="Name of the new folder")
    expect(field).to_be_focused()
    field.fill("Travel")
    page.keyboard.press("Enter")
    folder_toggle = page.get_by_role("button", name="Travel (0)")
    expect(folder_toggle).to_be_focused()
    folder = ConversationFolder.objects.get(owner=user)
    assert folder.name == "Travel"

    # A second folder of the same name is refused, the name stays in the field.
    page.get_by_role("button", name="New folder").click()
    field = page.get_by_role("textbox", name="Name of the new folder")
    field.fill("Travel")
    page.keyboard.press("Enter")
    expect(page.locator("#search-status")).to_contain_text("already have a folder named")
    expect(field).to_have_value("Travel")
    page.keyboard.press("Escape")
    assert ConversationFolder.objects.filter(owner=user).count() == 1

    # Move "Trip" into it from its ⋯ menu, by keyboard.
    page.get_by_role("button", name="More actions for Trip").focus()
    page.keyboard.press("Enter")
    menu = page.get_by_role("menu", name="Trip")
    menu.get_by_role("menuitem", name="Move to folder…").click()
    into = menu.get_by_role("menuitem", name="Into “Travel”")
    expect(into).to_be_focused()
    page.keyboard.press("Enter")
    group = page.locator(".folder-group")
    expect(group.locator(".conversation-link-title")).to_have_text(["Trip"])
    expect(page.get_by_role("button", name="More actions for Trip")).to_be_focused()
    trip.refresh_from_db()
    assert trip.folder_id == folder.pk

    # Folded, it hides its conversations; a reload keeps the folder and the fold.
    page.get_by_role("button", name="Travel (1)").click()
    expect(group.locator(".conversation-link-title")).to_be_hidden()
    page.reload()
    open_list(tab, viewport)
    toggle = page.get_by_role("button", name="Travel (1)")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(page.locator(".folder-group .conversation-link-title")).to_have_text(["Trip"])
    assert_accessible(tab)

    # Select two and archive them: gone at once, Undo brings both back.
    page.get_by_role("button", name="Select", exact=True).click()
    expect(page.locator("#bulk-bar")).to_be_visible()
    page.get_by_role("checkbox", name="Select Notes").check()
    page.get_by_role("checkbox", name="Select Budget").check()
    expect(page.locator("#bulk-count")).to_have_text("2 selected")
    assert_accessible(tab)
    page.locator("#bulk-bar").get_by_role("button", name="Archive").click()
    toast = page.locator("#sidebar-toast")
    expect(toast).to_contain_text("Archived 2 conversations.")
    expect(page.locator("#conversation-list .conversation-link-title")).to_have_text(["Trip"])
    assert set(Conversation.objects.filter(archived=True).values_list("title", flat=True)) == {
        "Notes",
        "Budget",
    }
    expect(page.locator("#bulk-bar")).to_be_hidden()
    page.get_by_role("button", name="Undo").click()
    expect(page.locator("#conversation-list .conversation-link-title")).to_have_count(3)
    assert not Conversation.objects.filter(archived=True).exists()
    for conversation in (notes, budget):
        conversation.refresh_from_db()
        assert conversation.folder_id is None
    assert tab.errors == []


def test_bulk_delete_waits_for_the_toast_and_undo_sends_nothing(open_tab, user):
    first = conversation_with(user, "First")
    second = conversation_with(user, "Second")
    conversation_with(user, "Kept")
    page = open_tab(user).page
    toast = page.locator("#sidebar-toast")

    def delete_two() -> None:
        page.get_by_role("button", name="Select", exact=True).click()
        page.get_by_role("checkbox", name="Select First").check()
        page.get_by_role("checkbox", name="Select Second").check()
        page.locator("#bulk-bar").get_by_role("button", name="Delete").click()
        expect(toast).to_contain_text("Deleted 2 conversations.")
        expect(page.locator("#conversation-list .conversation-link-title")).to_have_text(["Kept"])

    delete_two()
    page.get_by_role("button", name="Undo").click()
    expect(page.locator("#conversation-list .conversation-link-title")).to_have_count(3)
    assert Conversation.objects.filter(pk__in=[first.pk, second.pk]).count() == 2

    delete_two()
    with page.expect_response(lambda r: r.url.endswith("/api/conversations/bulk/")) as sent:
        expect(toast).to_be_hidden()
    assert sent.value.status == 200
    assert not Conversation.objects.filter(pk__in=[first.pk, second.pk]).exists()


def test_deleting_a_folder_asks_and_keeps_its_conversations(open_tab, user):
    folder = ConversationFolder.objects.create(owner=user, name="Work")
    report = conversation_with(user, "Report")
    Conversation.objects.filter(pk=report.pk).update(folder=folder)
    tab = open_tab(user)
    page = tab.page
    expect(page.locator(".folder-group .conversation-link-title")).to_have_text(["Report"])

    page.get_by_role("button", name="More actions for the folder Work").click()
    page.get_by_role("menu", name="Work").get_by_role("menuitem", name="Delete folder").click()
    dialog = page.get_by_role("dialog", name="Delete the folder “Work”?")
    expect(dialog).to_contain_text("Its conversations are kept")
    # Escape keeps it.
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert ConversationFolder.objects.filter(pk=folder.pk).exists()

    page.get_by_role("button", name="More actions for the folder Work").click()
    page.get_by_role("menu", name="Work").get_by_role("menuitem", name="Delete folder").click()
    dialog.get_by_role("button", name="Delete folder").click()
    expect(page.locator(".folder-group")).to_have_count(0)
    expect(page.locator("#conversation-list .conversation-link-title")).to_have_text(["Report"])
    assert not ConversationFolder.objects.filter(pk=folder.pk).exists()
    report.refresh_from_db()
    assert report.folder_id is None
    assert tab.errors == []


def test_drag_a_conversation_onto_a_folder(open_tab, user):
    ConversationFolder.objects.create(owner=user, name="Ideas")
    idea = conversation_with(user, "Idea")
    page = open_tab(user).page
    page.locator(".conversation-item", has_text="Idea").drag_to(page.locator(".folder-group"))
    expect(page.locator(".folder-group .conversation-link-title")).to_have_text(["Idea"])
    idea.refresh_from_db()
    assert idea.folder.name == "Ideas"
    # And back out, onto a date group.
    conversation_with(user, "Other")
    page.reload()
    page.locator(".folder-group .conversation-item").drag_to(
        page.locator(".conversation-group:not(.folder-group)").first
    )
    expect(page.locator(".folder-group .conversation-link-title")).to_have_count(0)
    idea.refresh_from_db()
    assert idea.folder_id is None


def test_another_tab_follows_folders_and_moves(open_tab, user):
    conversation_with(user, "Shared plans")
    page = open_tab(user).page
    other = page.context.new_page()
    other.goto("/")
    expect(other.locator(".conversation-link-title")).to_have_text(["Shared plans"])

    page.get_by_role("button", name="New folder").click()
    page.get_by_role("textbox", name="Name of the new folder").fill("Plans")
    page.keyboard.press("Enter")
    expect(other.get_by_role("button", name="Plans (0)")).to_be_visible()

    page.get_by_role("button", name="More actions for Shared plans").click()
    menu = page.get_by_role("menu", name="Shared plans")
    menu.get_by_role("menuitem", name="Move to folder…").click()
    menu.get_by_role("menuitem", name="Into “Plans”").click()
    expect(other.locator(".folder-group .conversation-link-title")).to_have_text(["Shared plans"])
