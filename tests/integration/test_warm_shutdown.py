"""A warm shutdown (SIGTERM, as a deploy sends) hands the worker's runs back at once: the
worker exits without waiting for them, and another worker resumes them from their stored
steps, with no tool run twice and no step lost or repeated on the open socket."""

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
    model_name,
    step_kinds,
    stored,
    wait_until,
)
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_sigterm_hands_the_run_to_another_worker(live_stack, spawn_worker, user):
    model = model_name("handback")
    # The second call would hold the leaving worker for an hour.
    live_stack.model.script(model, [Reply(ACTION), Hang(3600), Reply(FINAL)])
    profile = live_stack.profile(model)
    staying = live_stack.worker
    staying.pause()  # the run starts on the worker that is about to leave
    leaving = spawn_worker()
    conversation = conversation_create(owner=user, profile=profile)
    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": "6*7", "client_id": uuid.uuid4().hex})
    wait_until(lambda: len(live_stack.model.requests(model)) == 2, what="the second model call")
    run = AgentRun.objects.get(conversation=conversation)
    assert run.worker_id.endswith(f":{leaving.pid}")
    staying.resume()

    leaving.stop()  # SIGTERM, then SIGKILL if it has not exited within 15 s

    assert leaving.proc.returncode == 0, leaving.log_text()[-3000:]
    assert "handed back runs" in leaving.log_text()
    run = live_stack.wait_for_run(run.pk)
    frames = stored(sock.receive_until(run_ended))
    assert run.status == AgentRun.Status.SUCCEEDED
    assert run.attempts == 2
    assert run.worker_id.endswith(f":{staying.pid}")
    events = assert_log_sound(conversation)
    assert [e.payload["attempt"] for e in events if e.type == "run.started"] == [1, 2]
    # The tool ran once; the call cut off by the shutdown was asked again on the new worker.
    assert step_kinds(events).count("observation") == 1
    assert len(live_stack.model.requests(model)) == 3
    assert [f["seq"] for f in frames] == [e.seq for e in events]
