"""A run frees its worker thread: the task claims the run, hands it to the process's loop
and returns, so the worker's concurrency (``-c``) does not cap how many runs it drives."""

from __future__ import annotations

import threading

import pytest

from agents.llm.scripted import Reply
from agents.models import AgentRun, RunEvent
from agents.services.conversations import conversation_create, message_send
from tests.faults.checks import model_name, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_worker_with_one_thread_drives_two_runs_at_once(live_stack, spawn_worker, user):
    model = model_name("one-thread")
    # Every model call waits here until the test opens the gate: a run cannot end before.
    gate = threading.Event()

    def held_reply(body: dict) -> Reply:
        gate.wait(120)
        return Reply("Final Answer: done")

    live_stack.model.policy(model, held_reply)
    profile = live_stack.profile(model, tools=())
    live_stack.worker.stop()  # the session worker comes back for the next test
    worker = spawn_worker(concurrency=1)
    try:
        run_ids = [
            message_send(
                conversation=conversation_create(owner=user, profile=profile),
                user=user,
                content="go",
            ).run.pk
            for _ in range(2)
        ]

        # Both runs started and are waiting on the model, on one worker with one thread.
        wait_until(
            lambda: len(live_stack.model.requests(model)) == 2,
            timeout=60,
            what="both runs' model calls",
        )
        runs = AgentRun.objects.filter(pk__in=run_ids)
        assert {run.status for run in runs} == {AgentRun.Status.RUNNING}
        assert all(run.worker_id.endswith(f":{worker.pid}") for run in runs)
        started = RunEvent.objects.filter(run_id__in=run_ids, type="run.started")
        assert sorted(started.values_list("run_id", flat=True)) == sorted(run_ids)
    finally:
        gate.set()
    for run_id in run_ids:
        assert live_stack.wait_for_run(run_id).status == AgentRun.Status.SUCCEEDED
