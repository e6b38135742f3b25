"""Redis restarted mid-run, losing every queued task and every channel-layer group: the run
still finishes, a socket that reconnects with ``after_seq`` sees every event once, and the
next message is taken once the worker is connected to the new Redis.

Celery 5.7 with kombu 5.7 stops a worker that loses its Redis broker while an ``acks_late``
task is in flight (``Unrecoverable error: AttributeError ... 'hostname'`` when the consumer
closes the collected connection); the worker finishes its runs first (a warm shutdown). In
production a supervisor restarts it (docs/deploy.md: ``Restart=always``); this test plays
the supervisor.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from agents.llm.scripted import Reply
from agents.models import AgentRun
from agents.services.conversations import conversation_create
from tests.faults.checks import (
    ACTION,
    FINAL,
    assert_log_sound,
    model_name,
    stored,
    supervised,
    wait_until,
)
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _receive_across_drops(live_stack, conversation, user, daphne, frames, until) -> None:
    """Read frames until ``until``; when the server closes the socket, reconnect after the
    last seq seen, as the browser does."""
    from websockets.exceptions import ConnectionClosed

    while True:
        last = max([f["seq"] for f in stored(frames)], default=0)
        sock = live_stack.connect(conversation, user, after_seq=last, daphne=daphne)
        try:
            while True:
                frame = sock.receive(timeout=30)
                frames.append(frame)
                if until(frame):
                    return
        except ConnectionClosed:
            continue


def test_a_redis_restart_mid_run_loses_nothing(
    live_stack, spawn_worker, spawn_daphne, own_redis, user
):
    model = model_name("redis")
    gate = threading.Event()

    def held_final(body: dict) -> Reply:
        gate.wait(60)
        return Reply(FINAL)

    live_stack.model.script(model, [Reply(ACTION), held_final, Reply(ACTION), Reply(FINAL)])
    profile = live_stack.profile(model)
    live_stack.worker.stop()  # its sweeper must not rescue this run from the other Redis
    redis_env = {"REDIS_URL": own_redis.url, "CELERY_BROKER_URL": own_redis.url}
    worker = spawn_worker(**redis_env)
    daphne = spawn_daphne(**redis_env)
    conversation = conversation_create(owner=user, profile=profile)
    frames: list[dict] = []
    sock = live_stack.connect(conversation, user, daphne=daphne)
    sock.send({"type": "message.send", "content": "6*7", "client_id": uuid.uuid4().hex})
    wait_until(lambda: len(live_stack.model.requests(model)) == 2, what="the second model call")

    with supervised(worker):
        own_redis.restart()
        gate.set()
        first = live_stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)
        # A socket that outlived the restart may hear nothing more; reopening replays the log.
        sock.close()
        _receive_across_drops(live_stack, conversation, user, daphne, frames, run_ended)

        # The next message goes through the new Redis: enqueued by daphne, taken by a worker.
        sock = live_stack.connect(
            conversation, user, after_seq=stored(frames)[-1]["seq"], daphne=daphne
        )
        sock.send({"type": "message.send", "content": "again", "client_id": uuid.uuid4().hex})
        _receive_across_drops(live_stack, conversation, user, daphne, frames, run_ended)

    assert first.status == AgentRun.Status.SUCCEEDED
    events = assert_log_sound(conversation)
    assert [f["seq"] for f in stored(frames)] == [e.seq for e in events]
    runs = list(AgentRun.objects.filter(conversation=conversation).order_by("pk"))
    assert [run.status for run in runs] == [AgentRun.Status.SUCCEEDED] * 2
    assert len(live_stack.model.requests(model)) == 4
