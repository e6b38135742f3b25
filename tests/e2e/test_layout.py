"""The chat page holds still: wide answers scroll in their own box, the answer stays where
the reader is when a run ends, and menus open where there is room. At a desktop width and
at a phone's (issue 42)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
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

    assert overflow(page) == {"page": 0, "thread": 0}
    # The wide parts scroll sideways themselves, so nothing of them is lost.
    # (The code scrolls inside its <pre>, whose Copy button stays put.) A table wraps its
    # cells while it can, and scrolls when even wrapped it is too wide.
    assert answer.locator("pre code").evaluate("n => n.scrollWidth > n.clientWidth")
    if viewport is PHONE:
        assert answer.locator("table").evaluate("n => n.scrollWidth > n.clientWidth")
    assert inside_viewport(page, page.locator(".msg.assistant .thumb-down"))
    assert inside_viewport(page, answer.get_by_role("button", name="Copy the code"))
    screenshot(page, f"wide-answer-{viewport['width']}.png")
    assert tab.errors == []
