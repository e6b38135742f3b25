"""Stop stops at any moment: before the model's first byte, while it trickles, and during a
tool call, a cancel ends the run as cancelled, not as a timeout.

The model (and the tool's endpoint) would hold the run for minutes; each test waits on the
signal that the call is in progress, then sends ``run.cancel``.
"""

from __future__ import annotations

import uuid

import pytest

from agents.llm.scripted import Hang, Reply
from agents.models import AgentRun
from agents.services.conversations import conversation_create
from tests.faults.checks import assert_log_sound, model_name, step_kinds, wait_until
from tests.processes import run_ended
from tests.silent_server import SilentServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Far past the test's own wait for the end of the run: only a stop that works ends it.
HOURS = 3600.0


def _start(live_stack, user, model: str, *replies, tools=("calculator",)):
    live_stack.model.script(model, list(replies))
    profile = live_stack.profile(model, tools=tools, max_execution_time=HOURS)
    profile.model_config.request_timeout_seconds = HOURS
    profile.model_config.save()
    conversation = conversation_create(owner=user, profile=profile)
    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": "go", "client_id": uuid.uuid4().hex})
    started = sock.receive_until(lambda frame: frame["type"] == "run.started")[-1]
    return conversation, sock, started["run_id"]


def _stop(live_stack, sock, conversation, run_id: int) -> dict:
    sock.send({"type": "run.cancel", "run_id": run_id})
    ended = sock.receive_until(run_ended)[-1]
    run = live_stack.wait_for_run(run_id)
    assert ended["type"] == "run.cancelled"
    assert run.status == AgentRun.Status.CANCELLED
    assert run.error_code == ""
    assert_log_sound(conversation)
    return ended


def test_stop_before_the_models_first_byte(live_stack, user):
    model = model_name("stop-hang")
    conversation, sock, run_id = _start(live_stack, user, model, Hang(HOURS))
    wait_until(lambda: len(live_stack.model.requests(model)) == 1, what="the model call")

    ended = _stop(live_stack, sock, conversation, run_id)

    assert ended["partial_answer"] == ""
    assert len(live_stack.model.requests(model)) == 1


def test_stop_while_the_model_trickles(live_stack, user):
    model = model_name("stop-trickle")
    # The first chunk arrives at once, the next one an hour later.
    trickle = Reply(
        "Thought: I am thinking very slowly about this.\nFinal Answer: never",
        chunk_size=4,
        chunk_interval=HOURS,
    )
    conversation, sock, run_id = _start(live_stack, user, model, trickle)
    wait_until(lambda: len(live_stack.model.requests(model)) == 1, what="the model call")

    _stop(live_stack, sock, conversation, run_id)

    assert len(live_stack.model.requests(model)) == 1


def test_stop_during_a_tool_call(live_stack, user):
    server = SilentServer()
    try:
        name = f"slow_api_{uuid.uuid4().hex[:6]}"
        server.tool(name, timeout_seconds=HOURS / 20)
        model = model_name("stop-tool")
        action = Reply(f'Thought: I will ask the API.\nAction: {name}\nAction Input: {{"q": "x"}}')
        conversation, sock, run_id = _start(
            live_stack, user, model, action, Reply("Final Answer: never"), tools=(name,)
        )
        assert server.called.wait(30), "the tool never called its endpoint"
        assert not server.hung_up.is_set()

        _stop(live_stack, sock, conversation, run_id)

        # The tool's request ended with the run, not at the tool's timeout (3 minutes).
        assert server.hung_up.wait(30), "the tool's request outlived the stop"
        # The model was not asked again after the stop, and the stopped call has no
        # observation: the log ends with its action.
        assert len(live_stack.model.requests(model)) == 1
        events = assert_log_sound(conversation)
        assert events[-1].type == "run.cancelled"
        assert step_kinds(events)[-1] == "action"
        assert "observation" not in step_kinds(events)
    finally:
        server.close()
