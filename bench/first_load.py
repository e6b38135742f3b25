"""What the empty chat page costs a browser on its first, cold load: requests and bytes.

Through the browser tests' own stack (``tests/processes.py``, ``tests/e2e/conftest.py``):
daphne serving the collected static files as in production, and Debian's Chromium with an
empty cache. A signed-in user with no conversation opens ``/``; every response is counted
with the bytes it took on the wire (headers and body, compressed where the server
compressed). Then one question is asked, to show what the first answer brings with it (the
renderers load then, not before). The empty chat's figures are printed beside the target
(issue 42): what the page cost before the renderers came, 7 requests and 27.5 KB; the rest of
the page loads at the person's first move (docs/performance.md#first-load), which this load,
left untouched until the network is idle, does not make.

    .venv/bin/python -m chatsite.server.process.embedded .venv/bin/python bench/first_load.py

The module lives outside ``testpaths`` and its name does not start with ``test_``: ``make
test`` never collects it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    plugins = ["-p", "tests.conftest", "-p", "tests.e2e.conftest", "-p", "no:cacheprovider"]
    sys.exit(pytest.main([__file__, *plugins, "-s", "-q", *sys.argv[1:]]))

from playwright.sync_api import expect  # noqa: E402

from agents.llm.scripted import Reply  # noqa: E402
from tests.e2e.test_chat import ask  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RENDERERS = (
    "markdown-it", "dompurify", "highlight.js/highlight", "markdown.", "code_blocks.",
    "katex", "math.",
)  # fmt: skip
MATH = ("katex", "math.")
TARGET_REQUESTS = 7
TARGET_KB = 27.5


def _count(page, seen: list[tuple[str, int]]) -> None:
    def finished(request) -> None:
        sizes = request.sizes()
        seen.append((request.url, sizes["responseHeadersSize"] + sizes["responseBodySize"]))

    page.on("requestfinished", finished)


def _report(title: str, seen: list[tuple[str, int]], base: str, *, target: bool = False) -> None:
    total = sum(size for _, size in seen)
    print(f"\n{title}: {len(seen)} requests, {total / 1024:.1f} KB on the wire")
    if target:
        within = len(seen) <= TARGET_REQUESTS and total / 1024 <= TARGET_KB
        verdict = "within" if within else "OVER"
        print(f"  target: at most {TARGET_REQUESTS} requests, {TARGET_KB} KB ({verdict})")
    for url, size in seen:
        print(f"  {size / 1024:7.1f} KB  {url.removeprefix(base)}")


def test_first_load_of_the_empty_chat(stack, open_tab, user, model_name):
    stack.model.script(model_name, [Reply("Thought: Easy.\nFinal Answer: ```python\nx = 4\n```")])
    stack.profile(model_name)
    first: list[tuple[str, int]] = []
    tab = open_tab(user, path="/", before_load=lambda page: _count(page, first))
    page = tab.page
    expect(page.locator("html[data-chat-ready]")).to_be_attached()
    page.wait_for_load_state("networkidle")
    base = stack.daphne.url
    _report("The empty chat, cold", first, base, target=True)
    loaded = [url for url, _ in first if any(name in url for name in RENDERERS)]
    assert loaded == [], f"renderers loaded before any answer needed them: {loaded}"

    later: list[tuple[str, int]] = []
    page.get_by_label("Agent").select_option(label=model_name)
    _count(page, later)
    ask(page, "What is 2 + 2?")
    expect(page.get_by_role("button", name="Copy the code")).to_be_visible()
    page.wait_for_load_state("networkidle")
    _report("Then the first answer (a new page, and what it loads)", later, base)
    # An answer without math does not bring KaTeX either.
    assert [url for url, _ in later if any(name in url for name in MATH)] == []
    assert tab.errors == []
