"""What people bring from other chat sites (issue 42): math typeset by KaTeX, loaded only for
an answer that has some and within the Content-Security-Policy; a language label on code."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.services.conversations import conversation_create
from tests.e2e.test_chat import ask

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
    assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
    assert tab.errors == []
