"""Continue after Stop, at a human pace: the model trickles its answer, the user stops it,
copies what was kept, and presses Continue; the answer goes on from where it stopped in the
same place, and the stopped version stays one switch away."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Pause, Reply
from agents.models import AgentRun, Message
from tests.e2e.test_accessibility import assert_accessible
from tests.e2e.test_stop import start, stop

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FIRST_WORDS = "Red, yellow"
REST = "Red, yellow and blue are the primary colours."


def test_stop_copy_then_continue_the_answer(stack, open_tab, user, model_name):
    # A few characters at a time; after the first words the model goes quiet until stopped.
    quiet = Pause(after_chars=len("Final Answer: ") + len(FIRST_WORDS))
    trickle = Reply(
        f"Final Answer: {FIRST_WORDS} and green", chunk_size=3, chunk_interval=0.2, pause=quiet
    )
    # The continuation: the model repeats the last words, as it is asked to, then the rest.
    going_on = Reply(
        f"Thought: I go on from where I was stopped.\nFinal Answer: {REST}",
        chunk_size=6,
        chunk_interval=0.1,
    )
    try:
        tab, conversation, held = start(stack, open_tab, user, model_name, [trickle, going_on])
        page = tab.page
        expect(page.locator(".answer.streaming")).to_contain_text("Red")
        stopped_run = stop(stack, tab, conversation, held)
    finally:
        quiet.open()
    stopped = Message.objects.get(run=stopped_run)
    assert stopped.content
    assert FIRST_WORDS.startswith(stopped.content)

    # Copy takes what was kept of the stopped answer.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy the answer as Markdown").click()
    expect(page.locator(".copy-answer")).to_have_text("Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == stopped.content
    assert_accessible(tab)

    page.get_by_role("button", name="Continue writing this answer").click()

    # The same place on the page: the stopped text, then the rest as the model writes it.
    answer = page.locator(".msg.assistant .answer")
    expect(answer).to_have_count(1)
    expect(answer).to_have_text(REST)
    continued = AgentRun.objects.exclude(pk=stopped_run.pk).get(conversation=conversation)
    continued = stack.wait_for_run(continued.pk)
    assert continued.status == AgentRun.Status.SUCCEEDED
    assert continued.continues_answer_id == stopped.pk
    assert Message.objects.get(run=continued).content == REST
    # The model was shown the stopped text and asked for the rest.
    prompt = stack.model.requests(model_name)[-1]["messages"][-1]["content"]
    assert stopped.content in prompt
    # The stopped version is kept, one switch away.
    expect(page.locator(".msg.assistant .branch-position")).to_have_text("2 / 2")
    page.get_by_role("button", name="Previous version").click()
    expect(answer).to_contain_text(stopped.content)
    expect(page.locator(".run-status.cancelled")).to_have_text("Stopped")
    assert_accessible(tab)
    assert tab.errors == []
