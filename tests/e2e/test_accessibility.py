"""Accessibility as axe-core sees it in Chromium: no serious or critical WCAG 2 A/AA violation on
the pages people and staff use; and the mobile drawer keeps the keyboard inside while open.

axe-core (tests/e2e/vendor/, never served by the app) is evaluated in the page by Playwright,
so the page's Content-Security-Policy stays in force and is checked as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import AgentRun
from agents.services.conversations import (
    conversation_create,
    conversation_set_archived,
    message_send,
)
from agents.services.feedback import feedback_set
from agents.services.shares import share_create
from tests.e2e.conftest import DESKTOP, MOBILE
from tests.e2e.test_chat import ask as ask_now
from tests.e2e.test_chat import calculator_script

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

AXE_SOURCE = Path(__file__).parent / "vendor" / "axe.min.js"
AXE_VERSION = "4.14.1"
BLOCKING_IMPACTS = ("serious", "critical")


def blocking_violations(page) -> list[str]:
    """axe-core's serious and critical WCAG 2 A/AA violations on the page as it is now, one
    line each: rule id, impact, and the elements it found."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE_SOURCE.read_text())
    assert page.evaluate("() => axe.version") == AXE_VERSION
    results = page.evaluate(
        """() => axe.run(document, {
            runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']},
            resultTypes: ['violations'],
            // Preloading re-adds the page's @imported stylesheets as <style> elements, which
            // the CSP rightly refuses; only a WCAG 2.1 rule outside these tags needs them.
            preload: false,
        })"""
    )
    return [
        f"{violation['id']} ({violation['impact']}): "
        + "; ".join(
            f"{' '.join(map(str, node['target']))} — {node.get('failureSummary', '')}"
            for node in violation["nodes"]
        )
        for violation in results["violations"]
        if violation["impact"] in BLOCKING_IMPACTS
    ]


def assert_accessible(tab) -> None:
    violations = blocking_violations(tab.page)
    assert violations == [], "axe-core found:\n" + "\n".join(violations)
    assert tab.errors == [], "script errors or CSP refusals:\n" + "\n".join(tab.errors)


def dark(page) -> None:
    page.emulate_media(color_scheme="dark")


def light(page) -> None:
    page.emulate_media(color_scheme="light")


BACKGROUND = "() => getComputedStyle(document.body).backgroundColor"


def assert_accessible_in_light_and_dark(tab, show, *, reload: bool = True) -> None:
    """The page as it is now (opened in the light colour scheme), then loaded again in the
    dark one: one run, one user and one flush for both schemes.

    After a reload, ``show(page)`` brings the page back to the state checked (a menu open,
    steps shown); with ``reload=False`` it loads the page itself. Switching the scheme on the
    open page is not enough: Django admin's links kept their light colour on a dark
    background until a reload. The body's background must differ between the two, so a
    switch that did not take cannot pass for a check of the dark scheme.
    """
    page = tab.page
    found = [f"[light] {violation}" for violation in blocking_violations(page)]
    light_background = page.evaluate(BACKGROUND)
    dark(page)
    if reload:
        page.reload()
    show(page)
    found += [f"[dark] {violation}" for violation in blocking_violations(page)]
    assert found == [], "axe-core found:\n" + "\n".join(found)
    assert page.evaluate(BACKGROUND) != light_background, "the page did not turn dark"
    assert tab.errors == [], "script errors or CSP refusals:\n" + "\n".join(tab.errors)


def ask_and_await_the_answer(page, text: str) -> None:
    """Asks once the page's script is running (before it, Enter only adds a line to the box;
    the sidebar's list is drawn by the same script that handles the composer), then waits
    for the run to end: the answer is stored and the page shows its usage line."""
    expect(page.locator("#conversation-list a").first).to_be_attached()
    ask_now(page, text)
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")
    expect(page.locator(".answer strong")).to_have_text("4")


def answered_conversation(stack, user, model_name):
    """A conversation whose one question was answered after a calculator step."""
    profile = stack.profile(model_name, tools=("calculator",))
    stack.model.script(model_name, calculator_script())
    return profile, conversation_create(owner=user, profile=profile, title="Adding up")


VIEWPORTS = {"desktop": DESKTOP, "mobile": MOBILE}


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_chat_page_with_steps_open(stack, open_tab, user, model_name, viewport):
    _, conversation = answered_conversation(stack, user, model_name)
    tab = open_tab(
        user, viewport=VIEWPORTS[viewport], path=f"/c/{conversation.pk}/", before_load=light
    )
    ask_and_await_the_answer(tab.page, "What is 2 + 2?")

    def show_steps(page) -> None:
        page.locator("details.steps summary").click()
        expect(page.locator(".step.observation")).to_be_visible()

    show_steps(tab.page)  # as the run left them, then from the stored log
    assert_accessible_in_light_and_dark(tab, show_steps)


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_new_chat_page(stack, open_tab, user, model_name, viewport):
    profile = stack.profile(
        model_name,
        description="Does sums with a calculator.",
        suggested_prompts="What is (28 + 10) * 3?\nWhat is 7 squared?",
    )
    tab = open_tab(user, viewport=VIEWPORTS[viewport], path="/", before_load=light)

    def show_suggestions(page) -> None:
        expect(page.get_by_role("heading", name="What can I help with?")).to_be_visible()
        page.get_by_label("Agent").select_option(profile.slug)
        expect(page.get_by_role("button", name="What is 7 squared?")).to_be_visible()

    show_suggestions(tab.page)
    assert_accessible_in_light_and_dark(tab, show_suggestions)


def test_mobile_drawer_open(stack, open_tab, user, model_name):
    _, conversation = answered_conversation(stack, user, model_name)
    tab = open_tab(user, viewport=MOBILE, path=f"/c/{conversation.pk}/")
    tab.page.get_by_role("button", name="Open the conversation list").click()
    expect(tab.page.get_by_role("complementary", name="Conversations")).to_be_visible()
    assert_accessible(tab)


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_user_menu_open(stack, open_tab, make_user, viewport):
    """The menu with every item a staff member sees (theme, language, password, admin)."""
    staff = make_user("staff-reader", is_staff=True)
    tab = open_tab(staff, viewport=VIEWPORTS[viewport], path="/", before_load=light)

    def open_the_menu(page) -> None:
        expect(page.locator("#user-menu[data-ready]")).to_be_attached()
        if viewport == "mobile":
            page.get_by_role("button", name="Open the conversation list").click()
        page.locator("#user-menu-button").click()
        expect(page.get_by_role("menu", name="Account and settings")).to_be_visible()
        expect(page.get_by_role("menuitem", name="Admin")).to_be_visible()

    open_the_menu(tab.page)
    assert_accessible_in_light_and_dark(tab, open_the_menu)


def test_archive_page(stack, open_tab, user, model_name):
    _, conversation = answered_conversation(stack, user, model_name)
    conversation_set_archived(conversation=conversation, archived=True)
    tab = open_tab(user, path="/archived/")
    expect(tab.page.get_by_role("link", name="Adding up", exact=True)).to_be_visible()
    assert_accessible(tab)


def test_sign_in_page(stack, open_tab):
    tab = open_tab(None, path="/accounts/login/", before_load=light)

    def show_the_form(page) -> None:
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()

    show_the_form(tab.page)
    assert_accessible_in_light_and_dark(tab, show_the_form)


def test_sign_in_page_with_an_error(stack, open_tab, user):
    tab = open_tab(None, path="/accounts/login/")
    tab.page.get_by_label("Username").fill("alice")
    tab.page.get_by_label("Password").fill("not the password")
    tab.page.get_by_role("button", name="Sign in").click()
    expect(tab.page.locator(".errorlist, [role=alert]").first).to_be_visible()
    assert_accessible(tab)


def test_shared_page(stack, open_tab, user, other_user, model_name):
    _, conversation = answered_conversation(stack, user, model_name)
    chat = open_tab(user, path=f"/c/{conversation.pk}/").page
    ask_and_await_the_answer(chat, "What is 2 + 2?")
    share, _ = share_create(conversation=conversation)
    tab = open_tab(other_user, path=f"/s/{share.token}/", before_load=light)

    def show_steps(page) -> None:
        expect(page.locator(".answer strong")).to_have_text("4")
        page.locator("details.steps summary").first.click()

    show_steps(tab.page)
    assert_accessible_in_light_and_dark(tab, show_steps)


def _finished_run(stack, user, model_name):
    """A run that went through the real worker, for the pages that show runs. Sent as the
    chat's send is, without a tab: the chat page has tests of its own above, and a tab per
    admin page made these the slowest tests of the suite."""
    profile, conversation = answered_conversation(stack, user, model_name)
    sent = message_send(conversation=conversation, user=user, content="What is 2 + 2?")
    run = stack.wait_for_run(sent.run.pk)
    assert run.status == AgentRun.Status.SUCCEEDED
    return profile, run


@dataclass(frozen=True)
class AdminPage:
    """An admin page the project adds: where it is, what shows it has loaded, and for the
    pages that answer a question, the question asked through their form first."""

    path: str  # formatted with the profile and the run
    loaded: str  # a selector
    text: str = ""  # which the loaded element contains
    question: str = ""

    def visit(self, page, profile, run) -> None:
        page.goto(self.path.format(profile=profile, run=run))
        if self.question:
            page.get_by_label("Question").fill(self.question)
            page.locator("input[type=submit]").click()
        loaded = page.locator(self.loaded)
        if self.text:
            expect(loaded).to_contain_text(self.text)
        else:
            expect(loaded).to_be_visible()


ADMIN_PAGES = {
    "run-inspector": AdminPage("/admin/agents/agentrun/{run.pk}/change/", "#content", "calculator"),
    "run-list": AdminPage("/admin/agents/agentrun/", "#result_list"),
    "usage": AdminPage("/admin/agents/agentrun/usage/", "#content"),
    "model-list": AdminPage("/admin/agents/modelconfig/", "#result_list"),
    "profile-form": AdminPage(
        "/admin/agents/agentprofile/{profile.pk}/change/", "#agentprofile_form"
    ),
    "profile-versions": AdminPage("/admin/agents/agentprofile/{profile.pk}/versions/", "#content"),
    "profile-preview": AdminPage(
        "/admin/agents/agentprofile/{profile.pk}/preview/",
        "#content",
        text="What is 2 + 2?",
        question="What is 2 + 2?",
    ),
    "profile-try-it": AdminPage(
        "/admin/agents/agentprofile/{profile.pk}/try/",
        "#try-steps",
        text="The answer is 6.",
        question="What is 3 + 3?",
    ),
    "tool-list": AdminPage("/admin/agents/toolconfig/", "#result_list"),
    "feedback-list": AdminPage("/admin/agents/answerfeedback/", "#result_list"),
    "feedback-by-version": AdminPage(
        "/admin/agents/answerfeedback/by-version/{profile.pk}/", "#content", "Great"
    ),
    "retrieval-test": AdminPage(
        "/admin/agents/knowledgedocument/retrieval/?query=refund&collection=default",
        "#retrieval-results",
    ),
}


@pytest.mark.parametrize("name", ADMIN_PAGES)
def test_admin_page(stack, open_tab, make_user, user, model_name, name):
    profile, run = _finished_run(stack, user, model_name)
    answer = run.conversation.messages.get(role="assistant")
    feedback_set(message=answer, user=user, rating="up", comment="Great")
    # The try-it page asks the model once per scheme.
    easy = Reply("Thought: Easy.\nFinal Answer: The answer is 6.")
    stack.model.script(model_name, [easy, easy])
    staff = make_user("staffer", is_staff=True, is_superuser=True)
    tab = open_tab(staff, path="/admin/", before_load=light)

    def visit(page) -> None:
        ADMIN_PAGES[name].visit(page, profile, run)

    visit(tab.page)
    assert_accessible_in_light_and_dark(tab, visit, reload=False)


def focused_element(page) -> str:
    return page.evaluate(
        "() => { const e = document.activeElement;"
        " return e.id || e.getAttribute('aria-label') || e.textContent.trim(); }"
    )


def test_mobile_drawer_traps_focus_and_escape_returns_it(stack, open_tab, user, model_name):
    _, conversation = answered_conversation(stack, user, model_name)
    tab = open_tab(user, viewport=MOBILE, path=f"/c/{conversation.pk}/")
    page = tab.page
    sidebar = page.get_by_role("complementary", name="Conversations")
    opener = page.get_by_role("button", name="Open the conversation list")
    opener.focus()
    page.keyboard.press("Enter")
    expect(sidebar).to_be_visible()
    expect(opener).to_have_attribute("aria-expanded", "true")

    # Forwards past the last control and backwards past the first: focus never leaves.
    in_drawer = "() => document.getElementById('sidebar').contains(document.activeElement)"
    stops = sidebar.locator("a[href], button, input, select, textarea").evaluate_all(
        "nodes => nodes.filter(n => n.offsetParent !== null).length"
    )
    seen = []
    for _ in range(stops + 2):
        page.keyboard.press("Tab")
        assert page.evaluate(in_drawer), f"Tab left the drawer after {seen}"
        seen.append(focused_element(page))
    for _ in range(stops + 2):
        page.keyboard.press("Shift+Tab")
        assert page.evaluate(in_drawer), f"Shift+Tab left the drawer after {seen}"
        seen.append(focused_element(page))
    # Every control of the drawer was reached on the way round.
    assert len(set(seen)) >= stops

    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(opener).to_be_focused()
    expect(opener).to_have_attribute("aria-expanded", "false")
    # Closed, the page's own controls take Tab again.
    page.keyboard.press("Tab")
    assert not page.evaluate(in_drawer)
    assert tab.errors == []
