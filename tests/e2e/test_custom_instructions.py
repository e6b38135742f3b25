"""Custom instructions from the user menu: a dialog that reads and stores them, refuses a
text that is too long with the reason while keeping it in the box, and passes axe; a run
then carries them to the model."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import UserPreference
from agents.services.conversations import conversation_create
from agents.services.preferences import CUSTOM_INSTRUCTIONS_MAX_CHARS
from tests.e2e.test_accessibility import assert_accessible
from tests.e2e.test_chat import ask
from tests.e2e.test_user_menu import open_user_menu

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

INSTRUCTIONS = "I keep bees in Lyon. Answer in French."


def stored(user) -> str:
    preference = UserPreference.objects.filter(user=user).first()
    return preference.custom_instructions if preference else ""


def test_write_custom_instructions_in_the_dialog(stack, open_tab, user, model_name):
    stack.model.script(model_name, [Reply("Final Answer: Bonjour.")])
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    open_user_menu(page).get_by_role("menuitem", name="Custom instructions…").click()
    dialog = page.get_by_role("dialog", name="Custom instructions")
    expect(dialog).to_be_visible()
    expect(page.locator("#instructions-dialog[data-ready]")).to_be_attached()
    box = dialog.get_by_label("Your instructions")
    expect(box).to_be_focused()
    expect(box).to_have_value("")
    assert_accessible(tab)

    # Too long: refused with the reason, and nothing typed is lost.
    too_long = "b" * (CUSTOM_INSTRUCTIONS_MAX_CHARS + 1)
    box.fill(too_long)
    expect(dialog.locator("#instructions-count")).to_have_text(
        f"{CUSTOM_INSTRUCTIONS_MAX_CHARS + 1} of {CUSTOM_INSTRUCTIONS_MAX_CHARS} characters"
    )
    dialog.get_by_role("button", name="Save").click()
    expect(dialog.get_by_role("alert")).to_contain_text(f"at most {CUSTOM_INSTRUCTIONS_MAX_CHARS}")
    expect(dialog).to_be_visible()
    expect(box).to_have_value(too_long)
    assert stored(user) == ""
    assert_accessible(tab)

    box.fill(INSTRUCTIONS)
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#user-menu-button")).to_be_focused()
    expect(page.locator("#announcer")).to_have_text("Custom instructions saved.")
    assert stored(user) == INSTRUCTIONS

    # Read back when the dialog opens again; Escape closes it without saving.
    open_user_menu(page).get_by_role("menuitem", name="Custom instructions…").click()
    expect(box).to_have_value(INSTRUCTIONS)
    box.fill("Something I will not keep.")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert stored(user) == INSTRUCTIONS

    # The next question carries them to the model.
    ask(page, "Hello?")
    expect(page.locator(".msg.assistant .answer")).to_have_text("Bonjour.")
    assert INSTRUCTIONS in stack.model.requests(model_name)[-1]["messages"][-1]["content"]
    assert tab.errors == []
