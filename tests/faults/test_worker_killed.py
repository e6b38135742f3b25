"""SIGKILL the worker mid-run, again and again: the run resumes from its stored steps each
time, and gives up with a visible reason once it has been interrupted too often."""

from __future__ import annotations

import uuid

import pytest

from agents.llm.scripted import Hang, Reply
from agents.models import AgentRun
from agents.services.conversations import conversation_create
from tests.faults.checks import (
    ACTION,
    FINAL,
    assert_log_sound,
    kill_while_waiting_on_the_model,
    model_name,
    step_kinds,
    stored,
)
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ADD = "Thought: Now add one.\nAction: calculator\nAction Input: 42+1"


def test_a_run_survives_two_kills_without_repeating_a_step(live_stack, user):
    model = model_name("kill2")
    live_stack.model.script(
        model,
        [Reply(ACTION), Hang(60), Reply(ADD), Hang(60), Reply(FINAL)],
    )
    conversation = conversation_create(owner=user, profile=live_stack.profile(model))
    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": "6*7, plus one", "client_id": uuid.uuid4().hex})

    kill_while_waiting_on_the_model(live_stack.worker, live_stack.model, model, calls=2)
    kill_while_waiting_on_the_model(live_stack.worker, live_stack.model, model, calls=4)
    run = live_stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)
    frames = stored(sock.receive_until(run_ended))

    assert run.status == AgentRun.Status.SUCCEEDED
    assert run.attempts == 3
    events = assert_log_sound(conversation)
    assert [e.payload["attempt"] for e in events if e.type == "run.started"] == [1, 2, 3]
    observations = [e.payload["text"] for e in events if e.payload.get("kind") == "observation"]
    assert [text.strip() for text in observations] == ["42", "43"]
    assert step_kinds(events).count("action") == 2
    # Five model calls: two answered, two cut off by a kill and asked again, one final.
    assert len(live_stack.model.requests(model)) == 5
    assert run.answer.content == "It is 42."
    # The socket stayed open across both crashes and saw the whole log exactly once.
    assert [f["seq"] for f in frames] == [e.seq for e in events]


def test_a_run_killed_every_attempt_fails_with_a_visible_reason(live_stack, spawn_worker, user):
    model = model_name("killall")
    live_stack.model.script(model, [Reply(ACTION), Hang(60), Hang(60)])
    profile = live_stack.profile(model)
    live_stack.worker.stop()  # only this test's worker takes runs; the next test restarts it
    worker = spawn_worker(AGENT_MAX_ATTEMPTS="2")
    conversation = conversation_create(owner=user, profile=profile)
    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": "6*7", "client_id": uuid.uuid4().hex})

    kill_while_waiting_on_the_model(worker, live_stack.model, model, calls=2)
    kill_while_waiting_on_the_model(worker, live_stack.model, model, calls=3)
    run = live_stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)
    failed = sock.receive_until(run_ended)[-1]

    assert run.status == AgentRun.Status.FAILED
    assert run.error_code == "too_many_attempts"
    assert failed["type"] == "run.failed"
    assert failed["code"] == "too_many_attempts"
    assert "interrupted 2 times" in failed["message"]
    events = assert_log_sound(conversation)
    # The one tool call that returned is stored once; nothing after it was invented.
    assert step_kinds(events) == ["thought", "action", "observation"]
    assert len(live_stack.model.requests(model)) == 3
