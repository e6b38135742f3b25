"""What other views of a conversation show (issue 42, item 13): a title renamed in one tab
reaches the other tabs' header and sidebar, and the admin's run list shows each run's
question without widening the page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.models import AgentRun, Message
from agents.services.conversations import conversation_create
from tests.e2e.conftest import MOBILE

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _rename_in_header(page, title: str) -> None:
    page.get_by_role("button", name="Rename").click()
    dialog = page.get_by_role("dialog", name="Rename conversation")
    dialog.get_by_label("Title").fill(title)
    dialog.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(title)


def test_a_rename_reaches_another_tab_of_the_browser_and_another_device(open_tab, user):
    conversation = conversation_create(owner=user, title="Untitled trip")
    Message.objects.create(conversation=conversation, role="user", content="Three days in Lisbon")
    first = open_tab(user, path=f"/c/{conversation.pk}/")
    expect(first.page.locator("html[data-chat-ready]")).to_be_attached()
    # Another tab of the same browser, and a browser of its own (another device).
    second = first.page.context.new_page()
    second.goto(f"/c/{conversation.pk}/")
    device = open_tab(user, path=f"/c/{conversation.pk}/")
    for page in (second, device.page):
        expect(page.locator("html[data-chat-ready]")).to_be_attached()
        expect(page.get_by_role("heading", level=1)).to_have_text("Untitled trip")

    _rename_in_header(first.page, "Lisbon trip")

    expect(second.get_by_role("heading", level=1)).to_have_text("Lisbon trip")
    expect(second.locator("#conversation-list .conversation-link")).to_have_text(["Lisbon trip"])
    assert second.title() == "Lisbon trip · chatsite"

    # The other device hears of it when its page is looked at again (Sidebar.refresh).
    expect(device.page.get_by_role("heading", level=1)).to_have_text("Untitled trip")
    device.page.evaluate("() => document.dispatchEvent(new Event('visibilitychange'))")
    expect(device.page.get_by_role("heading", level=1)).to_have_text("Lisbon trip")
    expect(device.page.locator("#conversation-list .conversation-link")).to_have_text(
        ["Lisbon trip"]
    )
    assert first.errors == []
    assert device.errors == []


@pytest.mark.parametrize("viewport", [None, MOBILE], ids=["1280", "375"])
def test_the_admins_run_list_shows_the_question_and_fits(open_tab, user, make_user, viewport):
    conversation = conversation_create(owner=user)
    question = "Why does the printer on the third floor " + "jam " * 60 + "every Monday?"
    message = Message.objects.create(conversation=conversation, role="user", content=question)
    AgentRun.objects.create(
        conversation=conversation, trigger_message=message, status=AgentRun.Status.SUCCEEDED
    )
    staff = make_user("root", is_staff=True, is_superuser=True)
    tab = open_tab(staff, path="/admin/agents/agentrun/", viewport=viewport)
    page = tab.page

    cell = page.locator("#result_list td.field-question")
    expect(cell).to_contain_text("Why does the printer on the third floor jam")
    assert cell.inner_text().endswith("…")
    assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth"), (
        "the run list widens the page"
    )
    assert tab.errors == []
