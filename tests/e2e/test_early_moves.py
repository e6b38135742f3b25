"""What a person does before the chat page's main script (chat.js) has arrived is done once it
has (static/js/chat_start.js): on a slow connection a tap or an Enter is not lost.

The script's request is held by the browser (Playwright's routing) until the test lets it go,
so "before it has arrived" is a state the test controls, not a race it hopes to win.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Route, expect

from agents.models import Conversation, ConversationFolder, Message
from agents.services.conversations import conversation_create
from tests.e2e.conftest import MOBILE
from tests.e2e.test_accessibility import answered_conversation
from tests.e2e.test_conversations import conversation_with

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHAT_SCRIPT = re.compile(r"/static/js/chat\.bundle(\.[0-9a-f]+)?\.js$")


class HeldScript:
    """chat.js's request, kept waiting until ``release``; later pages load it at once."""

    def __init__(self, page) -> None:
        self.routes: list[Route] = []
        self.released = False
        page.route(CHAT_SCRIPT, self._hold)

    def _hold(self, route: Route) -> None:
        if self.released:
            route.continue_()
        else:
            self.routes.append(route)

    def wait_until_asked(self, page, timeout: float = 15.0) -> None:
        """Until the page has asked for chat.js. Its request may come after the load that
        ``open_tab`` waits for (chat_start.js asks for it), and a route's handler runs only
        while Playwright reads the browser's messages: each round trip reads them."""
        deadline = time.monotonic() + timeout
        while not self.routes and time.monotonic() < deadline:
            page.evaluate("0")

    def release(self) -> None:
        assert self.routes, "the page never asked for chat.js"
        self.released = True
        for route in self.routes:
            route.continue_()


def conversation_page_waiting_for_its_script(tab_opener, user, conversation):
    """A phone-sized tab on the conversation's page, its chat.js asked for and held."""
    held: list[HeldScript] = []
    tab = tab_opener(
        user,
        viewport=MOBILE,
        path=f"/c/{conversation.pk}/",
        before_load=lambda page: held.append(HeldScript(page)),
    )
    script = held[0]
    script.wait_until_asked(tab.page)
    assert script.routes, "a conversation's page asks for chat.js at once"
    return tab, script


def test_a_tap_on_the_drawer_button_before_the_script_opens_the_drawer(
    stack, open_tab, user, model_name
):
    _, conversation = answered_conversation(stack, user, model_name)
    tab, script = conversation_page_waiting_for_its_script(open_tab, user, conversation)
    page = tab.page
    opener = page.get_by_role("button", name="Open the conversation list")
    sidebar = page.get_by_role("complementary", name="Conversations")

    opener.click()
    # Nothing can open it yet, and the tap is not lost either.
    expect(opener).to_have_attribute("aria-expanded", "false")
    script.release()

    expect(sidebar).to_be_visible()
    expect(opener).to_have_attribute("aria-expanded", "true")
    assert tab.errors == []


def test_focus_moved_before_the_script_stays_where_the_person_put_it(
    stack, open_tab, user, model_name
):
    # A conversation's page puts the focus in the message box as its script arrives; a person
    # who reached the drawer's button first keeps it there, and their Enter opens the drawer.
    _, conversation = answered_conversation(stack, user, model_name)
    tab, script = conversation_page_waiting_for_its_script(open_tab, user, conversation)
    page = tab.page
    opener = page.get_by_role("button", name="Open the conversation list")
    opener.focus()
    script.release()

    expect(page.locator("html[data-chat-ready]")).to_be_attached()
    expect(opener).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("complementary", name="Conversations")).to_be_visible()
    expect(opener).to_have_attribute("aria-expanded", "true")

    # Nobody touched this one: its box has the focus once the script is there.
    untouched = open_tab(user, viewport=MOBILE, path=f"/c/{conversation.pk}/").page
    expect(untouched.locator("html[data-chat-ready]")).to_be_attached()
    expect(untouched.get_by_label("Message", exact=True)).to_be_focused()
    assert tab.errors == []


def test_enter_in_the_box_before_the_script_sends_the_question(stack, open_tab, user, model_name):
    conversation_create(owner=user, profile=stack.profile(model_name), title="Older")
    held: list[HeldScript] = []
    tab = open_tab(user, path="/", before_load=lambda page: held.append(HeldScript(page)))
    page = tab.page
    script = held[0]
    box = page.get_by_label("Message", exact=True)

    # The first key fetches chat.js; the Enter comes while it is held.
    with page.expect_request(CHAT_SCRIPT):
        box.press_sequentially("Is this kept?")
    box.press("Enter")
    expect(box).to_have_value("Is this kept?")
    assert not Message.objects.filter(content="Is this kept?").exists()
    script.release()

    expect(page.locator(".msg.user").filter(has_text="Is this kept?")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    sent = Message.objects.get(content="Is this kept?")
    assert sent.conversation.owner == user
    assert sent.role == "user"
    assert tab.errors == []


def test_escape_before_the_script_closes_an_open_dialog(open_tab, user):
    # The sidebar's dialogs work before chat.js; their Escape is the browser's own, and a
    # held (cancelled) Escape used to leave the dialog open for good.
    folder = ConversationFolder.objects.create(owner=user, name="Work")
    Conversation.objects.filter(pk=conversation_with(user, "Report").pk).update(folder=folder)
    held: list[HeldScript] = []
    tab = open_tab(user, path="/", before_load=lambda page: held.append(HeldScript(page)))
    page = tab.page
    script = held[0]

    with page.expect_request(CHAT_SCRIPT):
        page.get_by_role("button", name="More actions for the folder Work").click()
    page.get_by_role("menu", name="Work").get_by_role("menuitem", name="Delete folder").click()
    dialog = page.get_by_role("dialog", name="Delete the folder “Work”?")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    script.release()

    expect(page.locator(".folder-group .conversation-link-title")).to_have_text(["Report"])
    expect(dialog).to_be_hidden()
    assert ConversationFolder.objects.filter(pk=folder.pk).exists()
    assert tab.errors == []
