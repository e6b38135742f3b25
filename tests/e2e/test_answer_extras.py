"""What people bring from other chat sites (issue 42): math typeset by KaTeX, loaded only for
an answer that has some and within the Content-Security-Policy; a language label on code;
keyboard shortcuts with a sheet that lists them; the composer's "/" menu; a new-chat button in
the mobile top bar."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Pause, Reply
from agents.services.conversations import conversation_create
from tests.e2e.conftest import MOBILE
from tests.e2e.test_accessibility import assert_accessible
from tests.e2e.test_chat import ask, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MATH_ANSWER = (
    "Thought: I know this.\nFinal Answer: The area is $\\pi r^2$, and\n\n"
    "$$\\int_0^1 x^2 \\, dx = \\frac{1}{3}$$\n\n"
    "It costs $5 and $10 here.\n\n```python\nprint('$x$')\n```"
)


def _katex_requests(seen: list[str]) -> list[str]:
    return [url for url in seen if "katex" in url or "/math." in url]


def test_math_is_typeset_and_code_names_its_language(stack, open_tab, user, model_name):
    stack.model.script(
        model_name,
        [Reply("Thought: Easy.\nFinal Answer: It costs $5 and $10."), Reply(MATH_ANSWER)],
    )
    profile = stack.profile(model_name)
    conversation = conversation_create(owner=user, profile=profile)
    seen: list[str] = []
    tab = open_tab(
        user,
        path=f"/c/{conversation.pk}/",
        before_load=lambda page: page.on("requestfinished", lambda r: seen.append(r.url)),
    )
    page = tab.page

    ask(page, "How much?")
    expect(page.locator(".msg.assistant .answer")).to_have_text("It costs $5 and $10.")
    page.wait_for_load_state("networkidle")
    assert _katex_requests(seen) == [], "money is not math: KaTeX should not load"

    ask(page, "And the area?")
    answer = page.locator(".msg.assistant .answer").nth(1)
    expect(answer.locator(".math:not(.math-display) .katex")).to_have_count(1)
    expect(answer.locator(".math-display .katex-display")).to_have_count(1)
    # MathML beside the drawing, for screen readers; the money and the code stay text.
    expect(answer.locator(".math math")).to_have_count(2)
    expect(answer).to_contain_text("It costs $5 and $10 here.")
    expect(answer.locator("pre code")).to_have_text("print('$x$')")
    expect(answer.locator("pre .code-language")).to_have_text("python")
    assert _katex_requests(seen), "KaTeX was not loaded for the math"
    # The stylesheet and its fonts load under the page's policy (tab.errors has CSP refusals).
    family = answer.locator(".katex .mord").first.evaluate("n => getComputedStyle(n).fontFamily")
    assert "KaTeX" in family
    screenshot(page, "math.png")
    assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
    assert tab.errors == []


TEX = [r"a\,b", r"\{x\}", r"\begin{matrix}a\\b\end{matrix}"]
BACKSLASH_MATH = f"Thought: Done.\nFinal Answer: First ${TEX[0]}$ and ${TEX[1]}$.\n\n$${TEX[2]}$$"


def _typeset_tex(answer) -> list[str]:
    """The TeX KaTeX typeset, as its MathML annotation keeps it."""
    return answer.locator('.math annotation[encoding="application/x-tex"]').all_text_contents()


def test_math_keeps_its_backslashes_while_streaming_and_after(stack, open_tab, user, model_name):
    # Held after the formulas, so the live answer (rendered in the page) is checked first.
    gate = Pause(after_chars=len(BACKSLASH_MATH))
    stack.model.script(
        model_name, [Reply(BACKSLASH_MATH + "\n\nThat is all.", pause=gate, chunk_size=7)]
    )
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "Some TeX?")
    assert gate.reached.wait(30), "the model never got to its gate"
    streaming = page.locator(".msg.assistant .answer.streaming")
    expect(streaming.locator(".math-display .katex-display")).to_have_count(1)
    assert _typeset_tex(streaming) == TEX

    gate.open()
    answer = page.locator(".msg.assistant .answer:not(.streaming)")
    expect(answer).to_contain_text("That is all.")
    expect(answer.locator(".math .katex")).to_have_count(3)
    assert _typeset_tex(answer) == TEX
    # The matrix has its two rows.
    expect(answer.locator(".math-display .katex-html")).to_contain_text("a")
    assert answer.locator(".math-display mtable mtr").count() == 2
    assert tab.errors == []


def _answered_chat(stack, open_tab, user, model_name, script, **options):
    stack.model.script(model_name, script)
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    tab = open_tab(user, path=f"/c/{conversation.pk}/", **options)
    expect(tab.page.locator("html[data-chat-ready]")).to_be_attached()
    return tab, conversation


def test_keyboard_shortcuts_and_their_sheet(stack, open_tab, user, model_name):
    from agents.llm.scripted import Gate

    held = Gate(timeout=120)
    tab, _ = _answered_chat(
        stack,
        open_tab,
        user,
        model_name,
        [Reply("Thought: Easy.\nFinal Answer: Four."), held.hold(Reply("Final Answer: Late."))],
    )
    page = tab.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    ask(page, "What is 2 + 2?")
    expect(page.locator(".msg.assistant .answer")).to_have_text("Four.")

    page.keyboard.press("Control+/")
    sheet = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(sheet).to_be_visible()
    expect(sheet.locator("dt")).to_have_text(
        [
            "New chat",
            "Search conversations",
            "Copy the last answer",
            "Stop the answer being written",
            "Show or hide the conversation list",
            "Show these shortcuts",
        ]
    )
    assert_accessible(tab)
    screenshot(page, "shortcuts.png")
    page.keyboard.press("Escape")
    expect(sheet).to_be_hidden()

    page.keyboard.press("Control+k")
    search = page.get_by_role("searchbox", name="Search conversations by title or content")
    expect(search).to_be_focused()

    page.keyboard.press("Control+Shift+S")
    expect(page.locator("#sidebar")).to_be_hidden()
    page.keyboard.press("Control+Shift+S")
    expect(page.locator("#sidebar")).to_be_visible()

    page.keyboard.press("Control+Shift+C")
    expect(page.locator(".copy-answer")).to_have_text("Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == "Four."

    # Escape stops the answer being written, from the message box.
    ask(page, "And again?")
    held.wait_arrived(60)
    page.get_by_label("Message", exact=True).press("Escape")
    expect(page.locator(".run-status.cancelled")).to_have_count(1)
    held.open()

    page.keyboard.press("Control+Shift+O")
    expect(page).to_have_url(re.compile(r"/$"))
    assert tab.errors == []


def test_the_slash_menu_lists_the_commands_and_takes_one(stack, open_tab, user, model_name):
    tab, _ = _answered_chat(stack, open_tab, user, model_name, [])
    page = tab.page
    box = page.get_by_label("Message", exact=True)

    box.fill("/")
    menu = page.get_by_role("listbox", name="Commands")
    expect(menu.get_by_role("option")).to_have_count(3)
    expect(menu.locator(".command-name")).to_have_text(["/compact", "/new", "/shortcuts"])
    expect(menu.get_by_role("option").first).to_have_attribute("aria-selected", "true")
    assert_accessible(tab)
    screenshot(page, "slash-menu.png")
    box.press("ArrowDown")
    expect(menu.get_by_role("option").nth(1)).to_have_attribute("aria-selected", "true")
    box.press("Escape")
    expect(menu).to_be_hidden()

    box.fill("/sh")
    expect(menu.locator(".command-name")).to_have_text(["/shortcuts"])
    box.press("Enter")  # takes the command into the box, does not send it
    expect(box).to_have_value("/shortcuts")
    expect(menu).to_be_hidden()
    box.press("Enter")  # sends it: the page runs it
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    expect(page.locator(".msg.user")).to_have_count(0)
    assert tab.errors == []


def test_the_mobile_top_bar_has_a_new_chat_button(stack, open_tab, user, model_name):
    tab, _ = _answered_chat(stack, open_tab, user, model_name, [], viewport=MOBILE)
    page = tab.page
    top = page.locator(".topbar").get_by_role("link", name="New chat")
    expect(top).to_be_visible()
    box = top.bounding_box()
    assert box["width"] >= 24
    assert box["height"] >= 24
    assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
    assert_accessible(tab)
    screenshot(page, "mobile-top-bar.png")
    top.click()
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.locator(".topbar").get_by_role("link", name="New chat")).to_be_visible()
