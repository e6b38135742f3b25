"""The database unreachable from the worker for a few seconds, mid-run.

On PostgreSQL the worker reaches the database through a loopback TCP proxy the test cuts:
open connections are reset and new ones refused, then it lets them through again. On SQLite
(one file, no network) the test holds the write lock instead. Either way the run ends
(finished, or failed with a reason) and no step is lost or written twice.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import connection
from django.utils import timezone

from agents.llm.scripted import Gate, Reply
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
from tests.processes import database_url, run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

OUTAGE_SECONDS = 3.0


class CuttableProxy:
    """Forwards 127.0.0.1:<port> to ``upstream``; ``cut()`` resets every connection and
    refuses new ones until ``restore()``."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.down = threading.Event()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._stopped = False
        threading.Thread(target=self._accept, name="db-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down.is_set():
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._open += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, target), daemon=True).start()

    def cut(self) -> None:
        self.down.set()
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            _reset(sock)

    def restore(self) -> None:
        self.down.clear()

    def close(self) -> None:
        self._stopped = True
        self.listener.close()
        self.cut()


def _pump(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    for sock in (source, target):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        # SO_LINGER 0: close with a RST, like a crashed server or a dead network path.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()


@contextlib.contextmanager
def _worker_database() -> Iterator[tuple[dict[str, str], contextlib.AbstractContextManager]]:
    """(env for the worker, a context manager that makes the database unavailable)."""
    if connection.vendor == "postgresql":
        url = urlsplit(database_url())
        proxy = CuttableProxy((url.hostname or "127.0.0.1", url.port or 5432))
        netloc = url.netloc.rsplit("@", 1)
        netloc[-1] = f"127.0.0.1:{proxy.port}"
        proxied = urlunsplit(url._replace(netloc="@".join(netloc)))

        @contextlib.contextmanager
        def outage():
            proxy.cut()
            try:
                yield
            finally:
                proxy.restore()

        try:
            yield {"DATABASE_URL": proxied}, outage
        finally:
            proxy.close()
    else:

        @contextlib.contextmanager
        def outage():
            # Every write waits on this lock; SQLite's busy timeout keeps the worker waiting.
            locker = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
            locker.execute("BEGIN EXCLUSIVE")
            try:
                yield
            finally:
                locker.execute("ROLLBACK")
                locker.close()

        yield {}, outage


# Without a pool each write opens its connection; with one (docs/deploy.md), the worker's
# idle connections die in the outage and are found and replaced at check-out
# (chatsite/server/db/postgres/base.py).
@pytest.mark.parametrize("pool_size", ["0", "20"], ids=["no-pool", "pool"])
def test_a_database_outage_mid_run_loses_and_repeats_nothing(
    live_stack, spawn_worker, user, pool_size
):
    if pool_size != "0" and connection.vendor != "postgresql":
        pytest.skip("the connection pool is PostgreSQL's")
    model = model_name("db")
    # The first call is still waiting here when the database goes away and comes back.
    first_call = Gate()
    held_action = first_call.hold(Reply(ACTION))

    def answer(body: dict) -> Reply:
        if "42" in json.dumps(body["messages"]):
            return Reply(FINAL)
        return Reply(ACTION) if first_call.arrived else held_action(body)

    live_stack.model.policy(model, answer)
    profile = live_stack.profile(model)
    live_stack.worker.stop()  # only the worker behind the proxy takes this run
    with _worker_database() as (env, outage):
        worker = spawn_worker(**env, DATABASE_POOL_MAX_SIZE=pool_size)
        conversation = conversation_create(owner=user, profile=profile)
        sock = live_stack.connect(conversation, user)
        sock.send({"type": "message.send", "content": "6*7", "client_id": uuid.uuid4().hex})
        first_call.wait_arrived()

        with outage():
            time.sleep(OUTAGE_SECONDS)  # how long the outage lasts, not a wait for anything
        first_call.open()
        run = live_stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)
        frames = stored(sock.receive_until(run_ended))
        worker.stop()  # while its connections still have somewhere to go

    events = assert_log_sound(conversation)
    assert run.status == AgentRun.Status.SUCCEEDED, (run.error_code, run.error_message)
    assert [f["seq"] for f in frames] == [e.seq for e in events]
    # One action, one observation, one answer: however many attempts it took.
    assert step_kinds(events).count("action") == 1
    assert step_kinds(events).count("observation") == 1
    assert AgentRun.objects.get(pk=run.pk).answer.content == "It is 42."


def test_a_stale_heartbeat_does_not_let_the_same_worker_run_a_live_run_twice(live_stack, user):
    """What an outage leaves behind: the heartbeat went stale while the run's thread lived on
    waiting for the model, and the sweeper enqueued the run again. The worker that still
    drives it must not start a second copy in another thread."""
    from agents.tasks import run_execute

    model = model_name("stale")
    gate = threading.Event()

    def answer(body: dict) -> Reply:
        if "42" in json.dumps(body["messages"]):
            return Reply(FINAL)
        gate.wait(30)
        return Reply(ACTION)

    live_stack.model.policy(model, answer)
    conversation = conversation_create(owner=user, profile=live_stack.profile(model))
    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": "6*7", "client_id": uuid.uuid4().hex})
    wait_until(lambda: live_stack.model.requests(model), what="the first model call")
    run = AgentRun.objects.get(conversation=conversation)

    # The monitor cannot write the heartbeat (held stale here for a while, as during the
    # outage), and the sweeper enqueues the run again.
    long_ago = timezone.now() - timedelta(minutes=10)
    rescue = run_execute.delay(run.pk)

    def rescue_handled() -> bool:
        # Stale until the worker has dealt with the rescue: dropped it (the task ends), or
        # started a second copy (which asks the model again).
        AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=long_ago)
        done = f"{rescue.id}] succeeded" in live_stack.worker.log_text()
        return done or len(live_stack.model.requests(model)) > 1

    wait_until(rescue_handled, what="the worker to handle the re-enqueued run")
    gate.set()
    ended = live_stack.wait_for_run(run.pk)
    frames = stored(sock.receive_until(run_ended))

    events = assert_log_sound(conversation)
    assert ended.status == AgentRun.Status.SUCCEEDED
    assert ended.attempts == 1
    assert [f["seq"] for f in frames] == [e.seq for e in events]
    assert step_kinds(events).count("action") == 1
    assert len(live_stack.model.requests(model)) == 2
