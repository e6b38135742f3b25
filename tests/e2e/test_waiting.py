"""What the page says while it waits, and when waiting ended badly (issue 42, defects 6 and 7).

A model that has not answered yet is shown as awaited, with a count of the seconds; a failed
model call is said in plain words by its cause, with the reference staff look up and no error
code; a message sent while the agent is answering says it is queued and can be cancelled.
The model is held on a ``Gate`` (agents/llm/scripted.py): the tests wait on its signals and on
the page's states, never on a clock.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Fail, Gate, Reply
from agents.models import Message
from agents.services.conversations import conversation_create
from tests.e2e.conftest import MOBILE, WAIT_MS
from tests.e2e.test_accessibility import assert_accessible
from tests.e2e.test_chat import ask, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WAIT = WAIT_MS / 1000


def _chat(stack, open_tab, user, model_name, script, *, viewport=None, **profile):
    stack.model.script(model_name, script)
    chosen = stack.profile(model_name, tools=("calculator",), **profile)
    chosen.model_config.max_retries = 0
    chosen.model_config.save()
    conversation = conversation_create(owner=user, profile=chosen)
    tab = open_tab(user, path=f"/c/{conversation.pk}/", viewport=viewport)
    return tab, conversation


def test_a_silent_model_is_said_to_be_awaited_with_a_count(stack, open_tab, user, model_name):
    answer = Gate(timeout=WAIT * 2)
    tab, _ = _chat(
        stack, open_tab, user, model_name, [answer.hold(Reply("Final Answer: Here at last."))]
    )
    page = tab.page
    ask(page, "Are you there?")
    answer.wait_arrived(WAIT)

    title = page.locator(".msg.assistant .steps-title")
    expect(title).to_have_text(re.compile(r"^Still waiting for the model… \d+ s$"))
    screenshot(page, "waiting-for-the-model.png")
    first = int(re.search(r"(\d+) s$", title.inner_text())[1])
    # The count goes on while the model stays silent.
    expect(title).not_to_have_text(f"Still waiting for the model… {first} s")
    # Screen readers hear that the wait began, once, not every second.
    expect(page.locator(".msg.assistant .steps-progress")).to_have_text(
        "Still waiting for the model…"
    )

    answer.open()
    expect(page.locator(".msg.assistant .answer")).to_have_text("Here at last.")
    expect(title).not_to_contain_text("Still waiting")
    assert tab.errors == []


@pytest.mark.parametrize(
    ("failure", "words"),
    [
        pytest.param(Fail(500), "The AI model's server reported an error.", id="http-500"),
        pytest.param(
            Fail(401),
            "The AI model service did not accept this site's credentials.",
            id="bad-key",
        ),
    ],
)
def test_a_failed_model_is_described_by_its_cause_without_a_code(
    stack, open_tab, user, model_name, failure, words
):
    tab, conversation = _chat(stack, open_tab, user, model_name, [failure])
    page = tab.page
    ask(page, "Hello?")

    failed = page.locator(".run-status.failed")
    expect(failed).to_contain_text(words)
    run = conversation.runs.get()
    expect(failed).to_contain_text(f"(Reference: run {run.pk}.)")
    assert "could not be reached" not in failed.inner_text()
    assert "model_" not in failed.inner_text()
    assert tab.errors == []


@pytest.mark.parametrize("viewport", [None, MOBILE], ids=["1280", "375"])
def test_a_message_sent_during_a_run_is_queued_and_can_be_cancelled(
    stack, open_tab, user, model_name, viewport
):
    answer = Gate(timeout=WAIT * 2)
    script = [answer.hold(Reply("Final Answer: Four.")), Reply("Final Answer: Six.")]
    tab, conversation = _chat(stack, open_tab, user, model_name, script, viewport=viewport)
    page = tab.page
    ask(page, "What is 2 + 2?")
    answer.wait_arrived(WAIT)

    ask(page, "And 3 + 3?")
    queued = page.locator(".msg.user.queued")
    expect(queued.locator(".bubble")).to_have_text("And 3 + 3?")
    expect(queued.locator(".queued-note")).to_contain_text(
        "Queued: it will be sent when the answer finishes."
    )
    cancel = queued.get_by_role("button", name="Cancel this queued message")
    expect(cancel).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
    assert_accessible(tab)
    screenshot(page, f"queued-{page.viewport_size['width']}.png")

    cancel.click()
    expect(page.locator(".msg.user.queued")).to_have_count(0)
    box = page.get_by_label("Message", exact=True)
    expect(box).to_have_value("And 3 + 3?")
    expect(box).to_be_focused()

    # Sent again, it is queued again, and goes when the answer ends.
    box.press("Enter")
    expect(page.locator(".msg.user.queued")).to_have_count(1)
    answer.open()
    expect(page.locator(".msg.assistant .answer")).to_have_text(["Four.", "Six."])
    expect(page.locator(".msg.user.pending")).to_have_count(0)
    questions = Message.objects.filter(conversation=conversation, role="user")
    assert list(questions.order_by("pk").values_list("content", flat=True)) == [
        "What is 2 + 2?",
        "And 3 + 3?",
    ]
    assert tab.errors == []
