"""Stop in the browser, at any moment: before the model's first byte, while it trickles at a
human pace, and during a tool call.

Each time the page says "Stopping…" as soon as Stop is pressed (the ``run.cancel`` frame is
held back on its way to the server, so the page cannot be echoing the server), then
"Stopped" once the server has ended the run, which is stored as cancelled, never as a
timeout or a failure: the model and the tool would hold the run for an hour. The tests wait
on the servers' signals and on page states, never on a clock.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Hang, Pause, Reply
from agents.models import AgentRun, Message
from agents.services.conversations import conversation_create
from tests.e2e.conftest import WAIT_MS
from tests.e2e.test_chat import ask
from tests.faults.checks import assert_log_sound, step_kinds
from tests.silent_server import SilentServer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HOURS = 3600.0
WAIT = WAIT_MS / 1000  # a ceiling for a server's signal, never a measurement
ANSWER = "One two three four five six seven eight nine ten"


class HeldStop:
    """Routes the page's socket through the test and holds back its ``run.cancel`` frames
    until ``release()``; everything else passes through both ways."""

    def __init__(self) -> None:
        self.held: list[str] = []
        self.sockets: list = []

    def route(self, page) -> None:
        def handle(ws) -> None:
            server = ws.connect_to_server()
            self.sockets.append(server)
            ws.on_message(
                lambda message: (
                    self.held.append(message) if '"run.cancel"' in message else server.send(message)
                )
            )

        page.route_web_socket(re.compile(r"/ws/conversations/"), handle)

    def release(self) -> None:
        while self.held:
            self.sockets[-1].send(self.held.pop(0))


def pump_until(page, condition, *, what: str) -> None:
    """Wait for a server's signal while Playwright's loop keeps the routed socket going."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        page.wait_for_timeout(20)


def start(stack, open_tab, user, model_name, replies, *, tools=("calculator",)):
    stack.model.script(model_name, replies)
    profile = stack.profile(model_name, tools=tools, max_execution_time=HOURS)
    profile.model_config.request_timeout_seconds = HOURS
    profile.model_config.save()
    conversation = conversation_create(owner=user, profile=profile)
    held = HeldStop()
    tab = open_tab(user, path=f"/c/{conversation.pk}/", before_load=held.route)
    ask(tab.page, "Take your time.")
    return tab, conversation, held


def stop(stack, tab, conversation, held: HeldStop) -> AgentRun:
    """Press Stop: "Stopping…" before the server hears of it, then "Stopped"; returns the run."""
    page = tab.page
    summary = page.locator(".steps > summary")
    page.get_by_role("button", name="Stop").click()
    expect(summary).to_have_text("Stopping…")
    assert len(held.held) == 1, "the page sent no run.cancel"
    expect(page.locator(".run-status.cancelled")).to_have_count(0)

    held.release()
    expect(page.locator(".run-status.cancelled")).to_have_text("Stopped")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    run = stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)
    assert run.status == AgentRun.Status.CANCELLED
    assert run.error_code == ""
    events = assert_log_sound(conversation)
    assert events[-1].type == "run.cancelled"
    assert tab.errors == []
    return run


def shown_answer(page) -> str:
    """The answer's text on the page, without the "Stopped" line."""
    return page.locator(".msg.assistant .answer").evaluate(
        """node => {
            const copy = node.cloneNode(true);
            for (const extra of copy.querySelectorAll('.run-status, .copy-code')) extra.remove();
            return copy.textContent.trim();
        }"""
    )


def test_stop_before_the_models_first_byte(stack, open_tab, user, model_name):
    tab, conversation, held = start(stack, open_tab, user, model_name, [Hang(HOURS)])
    page = tab.page
    pump_until(page, lambda: stack.model.requests(model_name), what="the model call")
    expect(page.locator(".steps > summary")).to_have_text("Working…")

    run = stop(stack, tab, conversation, held)

    assert shown_answer(page) == ""
    assert not Message.objects.filter(run=run).exclude(content="").exists()
    assert len(stack.model.requests(model_name)) == 1


def test_stop_while_the_model_trickles(stack, open_tab, user, model_name):
    # A few tokens a second; after the fifth word the model goes quiet until the test ends.
    first_words = "One two three four five"
    quiet = Pause(after_chars=len("Final Answer: ") + len(first_words))
    trickle = Reply(f"Final Answer: {ANSWER}", chunk_size=4, chunk_interval=0.25, pause=quiet)
    try:
        tab, conversation, held = start(stack, open_tab, user, model_name, [trickle])
        page = tab.page
        expect(page.locator(".answer.streaming")).to_contain_text("One two")

        run = stop(stack, tab, conversation, held)
    finally:
        quiet.open()

    # What the model wrote before the stop is kept, on the page and in the log.
    stored = Message.objects.get(run=run).content
    assert stored.startswith("One two")
    assert first_words.startswith(stored)
    assert shown_answer(page) == stored
    page.reload()
    expect(page.locator(".run-status.cancelled")).to_have_text("Stopped")
    assert shown_answer(page) == stored


def test_stop_during_a_tool_call(stack, open_tab, user, model_name):
    endpoint = SilentServer()
    try:
        name = f"slow_api_{uuid.uuid4().hex[:6]}"
        endpoint.tool(name, timeout_seconds=HOURS / 20)
        action = Reply(f'Thought: I will ask the API.\nAction: {name}\nAction Input: {{"q": "x"}}')
        tab, conversation, held = start(
            stack, open_tab, user, model_name, [action, Reply("Final Answer: never")], tools=(name,)
        )
        page = tab.page
        pump_until(page, endpoint.called.is_set, what="the tool's request")
        expect(page.locator(".step.action")).to_have_count(1)
        assert not endpoint.hung_up.is_set()

        stop(stack, tab, conversation, held)

        # The tool's request ended with the run, not at the tool's timeout (3 minutes)...
        assert endpoint.hung_up.wait(WAIT), "the tool's request outlived the stop"
        # ...and the stopped call left no observation, on the page or in the log.
        expect(page.locator(".step.observation")).to_have_count(0)
        assert "observation" not in step_kinds(assert_log_sound(conversation))
        assert len(stack.model.requests(model_name)) == 1
    finally:
        endpoint.close()
