"""The chat page holds still: wide answers scroll in their own box, the answer stays where
the reader is when a run ends, and menus open where there is room. At a desktop width and
at a phone's (issue 42)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Pause, Reply
from agents.models import AgentProfile
from agents.services.conversations import conversation_create
from tests.e2e.test_chat import ask, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDE = {"width": 1280, "height": 800}
PHONE = {"width": 375, "height": 812}

LONG_LINE = "x = [" + ", ".join(f"{n:03d}" for n in range(60)) + "]"
TWELVE_COLUMNS = (
    "| " + " | ".join(f"column {n}" for n in range(1, 13)) + " |\n"
    "|" + "---|" * 12 + "\n"
    "| " + " | ".join(f"value number {n}" for n in range(1, 13)) + " |"
)
WIDE_ANSWER = f"Here it is.\n\n```python\n{LONG_LINE}\n```\n\n{TWELVE_COLUMNS}\n\nThat is all."


def overflow(page) -> dict:
    """How far the page and the thread are wider than what they show (0 when they hold)."""
    return page.evaluate(
        """() => {
            const doc = document.scrollingElement;
            const thread = document.getElementById('thread');
            return {
                page: doc.scrollWidth - doc.clientWidth,
                thread: thread.scrollWidth - thread.clientWidth,
            };
        }"""
    )


def inside_viewport(page, locator) -> bool:
    box = locator.bounding_box()
    width = page.viewport_size["width"]
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1280", "375"])
def test_wide_code_and_tables_scroll_in_their_own_box(stack, open_tab, user, model_name, viewport):
    assert len(LONG_LINE) >= 300
    stack.model.script(model_name, [Reply(f"Thought: Done.\nFinal Answer: {WIDE_ANSWER}")])
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    tab = open_tab(user, viewport=viewport, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "Show me something wide.")
    answer = page.locator(".msg.assistant .answer")
    expect(page.locator(".msg.assistant .thumb-down")).to_be_visible()
    expect(answer.locator("table th")).to_have_count(12)
    # Measured once the code block is finished (its Copy button is added with it).
    expect(answer.get_by_role("button", name="Copy the code")).to_be_attached()

    assert overflow(page) == {"page": 0, "thread": 0}
    # The wide parts scroll sideways themselves, so nothing of them is lost.
    # (The code scrolls inside its <pre>, whose Copy button stays put.) A table wraps its
    # cells while it can, and scrolls when even wrapped it is too wide. Waited for: the
    # code's scrolling box comes with highlight.js's stylesheet, which the page adds when
    # the first code block appears and which may load after the Copy button is there.
    scrolls = "([selector]) => { const n = document.querySelector(selector); "
    scrolls += "return n !== null && n.scrollWidth > n.clientWidth; }"
    page.wait_for_function(scrolls, arg=[".msg.assistant .answer pre code"])
    if viewport is PHONE:
        page.wait_for_function(scrolls, arg=[".msg.assistant .answer table"])
    assert inside_viewport(page, page.locator(".msg.assistant .thumb-down"))
    assert inside_viewport(page, answer.get_by_role("button", name="Copy the code"))
    screenshot(page, f"wide-answer-{viewport['width']}.png")
    # The code's Copy works there, and says so to screen readers too.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    answer.get_by_role("button", name="Copy the code").click()
    expect(page.locator("#announcer")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == f"{LONG_LINE}\n"
    assert tab.errors == []


PARAGRAPH = (
    "Lisbon sits on seven hills above the Tagus, and its old trams climb streets so steep "
    "that the pavements turn into stairs; the view from each hill is worth the climb."
)
LONG_ANSWER = "\n\n".join(f"Part {n}: {PARAGRAPH}" for n in range(1, 13))
ANSWER_END = " The end."


def answer_after_a_tool(answer: str, **options) -> tuple[list, Pause]:
    """A tool call (so there are steps to fold), then ``answer`` streamed at a reader's pace
    and held just before ``ANSWER_END``: the page has the answer's last delta but one."""
    text = f"Thought: I know this now.\nFinal Answer: {answer}{ANSWER_END}"
    gate = Pause(after_chars=len(text) - len(ANSWER_END))
    return [
        Reply(
            "Thought: I should check with the calculator.\nAction: calculator\nAction Input: 2 + 2"
        ),
        Reply(text, pause=gate, chunk_size=24, chunk_interval=0.02, **options),
    ], gate


def answer_top(page) -> float:
    return page.locator(".msg.assistant .answer").evaluate("n => n.getBoundingClientRect().top")


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1280", "375"])
def test_the_answer_holds_still_when_the_run_ends(stack, open_tab, user, model_name, viewport):
    replies, gate = answer_after_a_tool(LONG_ANSWER)
    stack.model.script(model_name, replies)
    profile = stack.profile(model_name)
    # A long name widens the agent picker: at 375 px the composer's row then wrapped when Stop
    # appeared, and the thread, shorter while the run went, moved the answer when it ended.
    AgentProfile.objects.filter(pk=profile.pk).update(name="A research assistant for travel")
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, viewport=viewport, path=f"/c/{conversation.pk}/")
    page = tab.page
    composer = page.locator("#composer")
    composer_height = composer.evaluate("n => n.offsetHeight")
    ask(page, "Tell me about Lisbon.")
    assert gate.reached.wait(30), "the model never got to its gate"
    streaming = page.locator(".msg.assistant .answer.streaming")
    expect(streaming).to_contain_text("Part 12: Lisbon sits")
    expect(streaming).to_contain_text("worth the climb.")
    # The steps folded when the answer began, not at the end.
    expect(page.locator(".msg.assistant details.steps")).not_to_have_attribute("open", "")
    expect(page.locator("#stop-button")).to_be_visible()
    assert composer.evaluate("n => n.offsetHeight") == composer_height
    before = answer_top(page)

    gate.open()
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")
    expect(page.locator(".msg.assistant .answer")).to_contain_text("The end.")
    after = answer_top(page)
    footer = page.locator(".msg.assistant .run-footer").evaluate("n => n.offsetHeight")
    assert abs(after - before) <= 3, (before, after, footer)
    screenshot(page, f"answer-ended-{viewport['width']}.png")
    assert tab.errors == []


def test_steps_the_reader_opened_stay_open_and_latest_brings_the_answer_back(
    stack, open_tab, user, model_name
):
    replies, gate = answer_after_a_tool(LONG_ANSWER)
    stack.model.script(model_name, replies)
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    tab = open_tab(user, viewport=WIDE, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "Tell me about Lisbon.")
    assert gate.reached.wait(30), "the model never got to its gate"
    expect(page.locator(".answer.streaming")).to_contain_text("worth the climb.")

    latest = page.get_by_role("button", name="Latest")
    expect(latest).to_be_hidden()  # the reader follows the answer at the end
    steps = page.locator(".msg.assistant details.steps")
    steps.locator("summary").click()
    expect(steps).to_have_attribute("open", "")
    page.locator("#thread").evaluate("n => { n.scrollTop = 0; }")
    expect(latest).to_be_visible()
    latest.click()
    expect(latest).to_be_hidden()
    assert page.locator("#thread").evaluate(
        "n => n.scrollHeight - n.scrollTop - n.clientHeight < 2"
    )

    gate.open()
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")
    expect(steps).to_have_attribute("open", "")
    expect(latest).to_be_hidden()
    assert tab.errors == []


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1280", "375"])
def test_the_last_conversations_menu_shows_all_its_items(stack, open_tab, user, viewport):
    for n in range(30):
        conversation_create(owner=user, title=f"Trip {n:02d}")
    tab = open_tab(user, viewport=viewport)
    page = tab.page
    if viewport is PHONE:
        page.get_by_role("button", name="Open the conversation list").click()
    last = page.locator("#conversation-list .conversation-item").last
    expect(last).to_contain_text("Trip 00")
    page.get_by_role("button", name="More actions for Trip 00").click()
    menu = page.get_by_role("menu", name="Trip 00")
    items = menu.get_by_role("menuitem")
    expect(items).to_have_count(5)
    # Each item is the element found at its own middle: nothing clips or covers it.
    for index in range(5):
        item = items.nth(index)
        assert item.evaluate(
            """n => {
                const box = n.getBoundingClientRect();
                const [x, y] = [box.x + box.width / 2, box.y + box.height / 2];
                const hit = document.elementFromPoint(x, y);
                return box.top >= 0 && box.bottom <= window.innerHeight && n.contains(hit);
            }"""
        ), item.inner_text()
    screenshot(page, f"last-menu-{viewport['width']}.png")
    # The first conversation's menu still opens downwards.
    page.keyboard.press("Escape")
    page.locator("#conversation-nav, .conversation-nav").evaluate("n => { n.scrollTop = 0; }")
    page.get_by_role("button", name="More actions for Trip 29").click()
    first_menu = page.get_by_role("menu", name="Trip 29")
    expect(first_menu).to_be_visible()
    assert first_menu.evaluate("n => !n.classList.contains('opens-up')")
    assert tab.errors == []


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1280", "375"])
def test_the_feedback_comment_box_leaves_regenerate_on_its_line(
    stack, open_tab, user, model_name, viewport
):
    stack.model.script(model_name, [Reply("Thought: Easy.\nFinal Answer: four")])
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    tab = open_tab(user, viewport=viewport, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "What is 2 + 2?")
    footer = page.locator(".msg.assistant .run-footer")
    regenerate = footer.get_by_role("button", name="Regenerate")
    expect(regenerate).to_be_visible()
    thumb_down = footer.get_by_role("button", name="Bad answer")

    def middle(locator) -> float:
        box = locator.bounding_box()
        return box["y"] + box["height"] / 2

    before = {"thumb": middle(thumb_down), "regenerate": middle(regenerate)}
    if viewport is WIDE:
        assert abs(before["regenerate"] - before["thumb"]) <= 1  # one line

    thumb_down.click()
    expect(footer.get_by_label("Comment on this answer (optional)")).to_be_visible()
    expect(footer.get_by_role("status")).to_have_text("Thanks for the feedback.")
    screenshot(page, f"feedback-comment-{viewport['width']}.png")
    # Neither the thumbs nor Regenerate moved: the box and the thanks open below them.
    assert {"thumb": middle(thumb_down), "regenerate": middle(regenerate)} == before
    line = thumb_down.bounding_box()["y"] + thumb_down.bounding_box()["height"]
    comment = footer.get_by_label("Comment on this answer (optional)").bounding_box()
    assert comment["y"] > line
    assert overflow(page) == {"page": 0, "thread": 0}
    assert tab.errors == []
