"""One worker process holds many runs at once without holding a database connection each.

Runs spend their time waiting on the model; the threads pool lets one process wait on many,
and a waiting run has closed its connection (agents/services/execution.py), so a few hundred
runs fit under PostgreSQL's default of 100 connections.
"""

from __future__ import annotations

import threading
import time
import uuid

import psutil
import pytest
from django.db import connection

from agents.llm.scripted import Reply
from agents.models import AgentRun
from agents.services.conversations import conversation_create, message_send

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

RUNS = 60


def _database_connections_of(pid: int) -> int:
    """The TCP connections process ``pid`` holds open to the database server."""
    port = int(connection.settings_dict.get("PORT") or 5432)
    return sum(
        1
        for socket in psutil.Process(pid).net_connections(kind="tcp")
        if socket.raddr and socket.raddr.port == port and socket.status == psutil.CONN_ESTABLISHED
    )


def test_one_worker_holds_sixty_runs_waiting_on_the_model(live_stack, spawn_worker, user, settings):
    settings.CHAT_SENDS_PER_MINUTE = 0
    model = f"capacity-{uuid.uuid4().hex[:8]}"
    # Every request waits at the model until the test opens the gate.
    gate = threading.Event()

    def held_reply(body: dict) -> Reply:
        gate.wait(120)
        return Reply("Final Answer: done")

    live_stack.model.policy(model, held_reply)
    profile = live_stack.profile(model, tools=())
    live_stack.worker.stop()  # the session worker comes back for the next test
    worker = spawn_worker(concurrency=RUNS)
    try:
        run_ids = [
            message_send(
                conversation=conversation_create(owner=user, profile=profile),
                user=user,
                content="go",
            ).run.pk
            for _ in range(RUNS)
        ]
        deadline = time.monotonic() + 60
        while len(live_stack.model.requests(model)) < RUNS:
            assert time.monotonic() < deadline, worker.log_text()[-3000:]
            time.sleep(0.1)

        # All sixty are in flight in one process, each waiting on the model.
        runs = AgentRun.objects.filter(pk__in=run_ids)
        assert runs.filter(status=AgentRun.Status.RUNNING).count() == RUNS
        assert {run.worker_id for run in runs} == {runs[0].worker_id}
        if connection.vendor == "postgresql":
            # Not one per run: at most the monitor's, the event loop's few and the database
            # threads' (which give theirs back while no write is queued).
            most = 1 + settings.AGENT_LOOP_DATABASE_CONNECTIONS + settings.AGENT_DATABASE_THREADS
            assert 0 < _database_connections_of(worker.pid) <= most < RUNS
    finally:
        gate.set()
    for run_id in run_ids:
        assert live_stack.wait_for_run(run_id).status == AgentRun.Status.SUCCEEDED
