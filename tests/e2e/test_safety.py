"""Model and tool text that tries to run script only ever shows up as text."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import ToolConfig
from agents.services.conversations import conversation_create
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TOOL_OUTPUT = (
    '<script>window.__pwned = "tool-script"; alert("tool-script")</script>'
    "<img src=x onerror=\"window.__pwned = 'tool-img'; alert('tool-img')\">"
    "<a href=\"javascript:alert('tool-link')\">tool link</a>"
)
THOUGHT = "Thought: I will look it up <img src=x onerror=\"alert('thought')\">"
FINAL_ANSWER = (
    "Final Answer: Here you are "
    '<script>window.__pwned = "answer-script"; alert("answer-script")</script> '
    "<img src=x onerror=\"window.__pwned = 'answer-img'; alert('answer-img')\"> "
    "[click me](javascript:window.__pwned='answer-link';alert('answer-link')) "
    "[encoded](&#106;avascript:alert('encoded')) "
    "<a href=\"javascript:alert('raw-link')\">raw link</a> "
    "<svg onload=\"alert('svg')\"></svg>"
)


def assert_nothing_ran(tab) -> None:
    page = tab.page
    assert tab.dialogs == [], f"a dialog opened: {tab.dialogs}"
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#thread img, #thread script, #thread iframe").count() == 0
    # The app draws its own icons as SVG (static/js/icons.js): only those may be in the
    # thread, and nothing of the model's <svg onload=...> survives.
    assert page.locator("#thread svg[onload]").count() == 0
    assert page.locator("#thread svg:not(.answer-tools > button > svg.icon)").count() == 0
    hrefs = page.locator("#thread a").evaluate_all("links => links.map(a => a.href)")
    assert all(h.startswith(("http:", "https:", "mailto:")) for h in hrefs), hrefs
    handlers = page.locator("#thread *").evaluate_all(
        "nodes => nodes.flatMap(n => [...n.attributes].map(a => a.name))"
        ".filter(name => name.startsWith('on'))"
    )
    assert handlers == []
    assert tab.errors == []


def test_script_from_the_model_and_a_tool_never_runs(stack, open_tab, user, model_name):
    ToolConfig.objects.create(
        name="notes",
        kind="lookup_table",
        description="Looks up a note by its key.",
        config={"table": {"evil": TOOL_OUTPUT}, "case_sensitive": False},
    )
    profile = stack.profile(model_name, tools=("notes",))
    stack.model.script(
        model_name,
        [
            Reply(f"{THOUGHT}\nAction: notes\nAction Input: evil"),
            Reply(f"Thought: Done.\n{FINAL_ANSWER}", chunk_size=5, chunk_interval=0.02),
        ],
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "Show me the note called evil")

    answer = page.locator(".msg.assistant .answer")
    expect(answer).to_contain_text("Here you are")
    expect(page.locator(".msg.assistant .usage")).to_be_visible()
    page.locator("details.steps summary").click()

    # What the tool and the model wrote is there to read, as text.
    expect(page.locator(".step.observation pre")).to_have_text(TOOL_OUTPUT)
    expect(page.locator(".step.thought").first).to_contain_text("<img src=x onerror=")
    expect(answer).to_contain_text('<script>window.__pwned = "answer-script"')
    expect(answer).to_contain_text("click me")
    answer.get_by_text("click me").click()
    assert_nothing_ran(tab)

    # The same after a reload, when the page draws the thread from the stored events.
    page.reload()
    expect(page.locator(".msg.assistant .answer")).to_contain_text("Here you are")
    page.locator("details.steps summary").click()
    expect(page.locator(".step.observation pre")).to_have_text(TOOL_OUTPUT)
    assert_nothing_ran(tab)
