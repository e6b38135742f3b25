"""Real processes for integration tests: a celery worker and daphne on the test database.

Only the model is fake (``agents.llm.scripted.ScriptedServer``, in this process). Everything
else is what production runs: PostgreSQL or the SQLite test file, Redis from ``REDIS_URL``,
``celery -A chatsite worker -P threads`` and ``daphne chatsite.asgi:application``.

Registered for every test through ``pytest_plugins`` in ``tests/conftest.py``. A test that
uses them needs committed data the processes can see, so mark it::

    pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

Fixtures
- ``scripted_model`` (session): the ``ScriptedServer``; give each test its own model names.
- ``celery_worker`` (session): a ``WorkerProcess`` handle: ``.kill()`` (SIGKILL),
  ``.restart()``, ``.stop()``, ``.alive``, ``.log_text()``, ``.pause()``/``.resume()``
  (stop/start taking tasks). It reads the session's queue (``tests/isolation.py``) and takes
  tasks only while a ``live_stack`` test runs; what such a test leaves on the queue is purged
  when it ends. Tests without a worker send their tasks to a queue of their folder's own.
- ``daphne_server`` (session): a ``DaphneProcess``: ``.url`` (``http://127.0.0.1:PORT``),
  ``.ws_url(path)``.
- ``live_stack`` (function): a ``LiveStack`` with ``.model``, ``.worker``, ``.daphne`` and
  helpers: ``profile(model_name, tools=...)`` (a profile whose ModelConfig points at the
  scripted server), ``session_cookie(user)``, ``connect(conversation, user, after_seq=0,
  daphne=None, origin=None)`` (a ``Socket`` over the real websocket with the session cookie
  and, unless given, an allowed ``Origin``), ``http(method, path, user, body=None)`` (JSON
  over HTTP with session and CSRF; returns ``(status, json)``), ``wait_for_run(run_id)``.
- ``spawn_worker(concurrency=20, **env)`` / ``spawn_daphne(**env)`` (function): start extra
  processes, stopped when the test ends (several-process tests).
- ``spawn_beat(**env)`` (function): a ``BeatProcess``, celery beat on the database scheduler,
  sending the schedules' tick to the session's queue (``SCHEDULE_TICK_SECONDS`` sets its
  pace); ``.kill()`` and ``.start()`` take it down and bring it back.

Both run under the suite's network guard (``tests.network_guard``, ``GUARDED_PYTHON``).

Session processes print the part of their log written during a test when it finishes, so a
failing test shows it. Worker timings are shortened (``WORKER_ENV``): heartbeats go stale
after 2 s and every worker sweeps each second, so crash recovery takes seconds, not minutes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from tests.isolation import queue_purge

BASE_DIR = Path(settings.BASE_DIR)
# ``python -m MODULE`` with the suite's network guard installed first (tests/network_guard.py).
GUARDED_PYTHON = (sys.executable, "-m", "tests.network_guard")
READY_TIMEOUT = 60.0

WORKER_ENV = {
    "AGENT_HEARTBEAT_STALE_SECONDS": "2",
    "AGENT_HEARTBEAT_INTERVAL_SECONDS": "0.3",
    "AGENT_CANCEL_POLL_SECONDS": "0.1",
    "AGENT_SWEEP_INTERVAL_SECONDS": "1",
    "AGENT_QUEUED_RESCUE_SECONDS": "5",
}


def database_url() -> str:
    """The URL of the database this test session uses (the test DB, not the real one)."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    user = quote(db.get("USER") or "", safe="")
    password = quote(db.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{host}{port}/{db['NAME']}"


def process_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "chatsite.settings",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "CHATSITE_VAR_DIR": str(settings.VAR_DIR),
        # Plain http on loopback.
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "STATICFILES_BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage",
        "PYTHONUNBUFFERED": "1",
        **WORKER_ENV,
    }
    env.update(extra)
    return env


class _Process:
    """A child process whose output goes to a log file we can read and print."""

    name = "process"

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.proc: subprocess.Popen | None = None
        fd, path = tempfile.mkstemp(prefix=f"chatsite-{self.name}-", suffix=".log")
        os.close(fd)
        self.log_path = Path(path)
        self._log_mark = 0

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self) -> _Process:
        with self.log_path.open("ab") as log:
            log.write(f"\n--- start {' '.join(self.command())}\n".encode())
            log.flush()
            self._log_start = self.log_path.stat().st_size
            self.proc = subprocess.Popen(
                self.command(), cwd=BASE_DIR, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited early:\n{self.log_text()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} was not ready in time:\n{self.log_text()}")
            time.sleep(0.1)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def kill(self) -> None:
        """SIGKILL: no cleanup, no acks, no goodbyes."""
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def restart(self) -> _Process:
        self.stop()
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _new_log_since_start(self) -> str:
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            return log.read().decode(errors="replace")

    def print_new_log(self) -> None:
        """Print what the process logged since the last call (shown if the test fails)."""
        text = self.log_text()
        new, self._log_mark = text[self._log_mark :], len(text)
        if new.strip():
            print(f"\n===== {self.name} log =====\n{new}")


class WorkerProcess(_Process):
    name = "celery-worker"
    # The queue run_execute goes to from daphne and the worker's own sweeper: the session's
    # (tests/early_env.py), named here because the test process routes its own elsewhere.
    queue = settings.CELERY_TASK_DEFAULT_QUEUE

    def __init__(self, env: dict[str, str], concurrency: int = 20) -> None:
        super().__init__(env)
        self.concurrency = concurrency
        self.node_name = f"test-{uuid.uuid4().hex[:8]}@%h"

    def command(self) -> list[str]:
        return [
            *GUARDED_PYTHON, "celery", "-A", "chatsite", "worker",
            "-P", "threads", "-c", str(self.concurrency), "-n", self.node_name, "-Q", self.queue,
            "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip

    def ready(self) -> bool:
        # Celery logs "<node> ready." once it consumes from the queue.
        return " ready." in self._new_log_since_start()

    def pause(self) -> None:
        """Stop taking tasks from the queue (the process stays up, ready to ``resume``)."""
        self._control("cancel_consumer")

    def resume(self) -> None:
        self._control("add_consumer")

    def _control(self, command: str) -> None:
        from chatsite.celery import app

        node = self.node_name.replace("%h", socket.gethostname())
        control = getattr(app.control, command)
        # A control command is broadcast on Redis pub/sub, and a worker that has just logged
        # "ready." may not have subscribed yet: a command sent then reaches nobody. Both
        # commands are safe to repeat (Celery leaves a queue it consumes, or does not, as is).
        for _ in range(3):
            if control(self.queue, destination=[node], reply=True, timeout=10):
                return
        raise RuntimeError(f"{node} did not answer {command}:\n{self.log_text()[-3000:]}")


class BeatProcess(_Process):
    """``celery beat`` with the database scheduler (settings.CELERY_BEAT_SCHEDULER): it sends
    ``agents.schedules_fire_due`` to the session's queue every ``SCHEDULE_TICK_SECONDS``."""

    name = "celery-beat"

    def command(self) -> list[str]:
        return [*GUARDED_PYTHON, "celery", "-A", "chatsite", "beat", "--loglevel=INFO"]

    def ready(self) -> bool:
        # Logged once the scheduler has read its entries and the loop is about to tick.
        return "beat: Starting..." in self._new_log_since_start()


class DaphneProcess(_Process):
    name = "daphne"

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env)
        self.port: int | None = None

    def command(self) -> list[str]:
        # Port 0: the kernel picks a free one and daphne logs which. As deployed: on uvloop.
        return [*GUARDED_PYTHON, "chatsite.server.process.daphne", "-b", "127.0.0.1", "-p", "0",
                "chatsite.asgi:application"]  # fmt: skip

    def ready(self) -> bool:
        found = re.search(
            r"Listening on TCP address 127\.0\.0\.1:(\d+)", self._new_log_since_start()
        )
        if not found:
            return False
        self.port = int(found.group(1))
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return True
        return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ws_url(self, path: str) -> str:
        return f"ws://127.0.0.1:{self.port}{path}"


class Socket:
    """A websocket to a conversation, speaking JSON frames (docs/protocol.md).

    Over websockets' sync client. When the server closes the socket, that client drops the
    frames it read with the close if it cannot write its answer, which happens once the
    server has given up waiting for it (autobahn aborts after a second): a test of the frames
    sent just before a close reads them with the asyncio client instead
    (tests/integration/test_sso.py, the sign-out)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []

    def send(self, frame: dict[str, Any]) -> None:
        self.ws.send(json.dumps(frame))

    def receive(self, timeout: float = 30.0) -> dict[str, Any]:
        frame = json.loads(self.ws.recv(timeout=timeout))
        self.frames.append(frame)
        return frame

    def receive_until(
        self, done: Callable[[dict[str, Any]], bool], timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """Frames up to and including the first for which ``done`` is true."""
        deadline = time.monotonic() + timeout
        received = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no matching frame; received {received}")
            frame = self.receive(timeout=remaining)
            received.append(frame)
            if done(frame):
                return received

    def close(self) -> None:
        self.ws.close()


def run_ended(frame: dict[str, Any]) -> bool:
    return frame.get("type") in ("run.finished", "run.failed", "run.cancelled")


class LiveStack:
    def __init__(self, model: Any, worker: WorkerProcess, daphne: DaphneProcess) -> None:
        self.model = model
        self.worker = worker
        self.daphne = daphne
        self._open = contextlib.ExitStack()

    def profile(self, model_name: str, *, tools: tuple[str, ...] = ("calculator",), **fields):
        """A profile whose model is ``model_name`` on the scripted server."""
        from agents.models import AgentProfile, ModelConfig, ToolConfig

        model_config = ModelConfig.objects.create(
            name=f"scripted {model_name}", base_url=self.model.base_url, model=model_name
        )
        model_config.set_api_key("test-key")
        model_config.save()
        fields.setdefault("max_execution_time", 60.0)
        profile = AgentProfile.objects.create(
            name=model_name, slug=re.sub(r"[^a-z0-9-]", "-", model_name.lower()),
            model_config=model_config, **fields,
        )  # fmt: skip
        profile.tools.set(ToolConfig.objects.filter(name__in=tools))
        return profile

    def session_cookie(self, user) -> str:
        from django.test import Client

        client = Client()
        client.force_login(user)
        name = settings.SESSION_COOKIE_NAME
        return f"{name}={client.cookies[name].value}"

    def connect(
        self,
        conversation,
        user,
        *,
        after_seq: int = 0,
        daphne: DaphneProcess | None = None,
        origin: str | None = None,
    ) -> Socket:
        """A websocket as ``user`` (None: anonymous); ``origin`` defaults to daphne's own."""
        from websockets.sync.client import connect

        server = daphne or self.daphne
        headers = {"Cookie": self.session_cookie(user)} if user is not None else {}
        ws = connect(
            server.ws_url(f"/ws/conversations/{conversation.pk}/?after_seq={after_seq}"),
            additional_headers=headers,
            origin=origin or server.url,
            open_timeout=10,
        )
        return Socket(self._open.enter_context(ws))

    def connect_notifications(self, user) -> Socket:
        """The user's notifications socket (``/ws/notifications/``)."""
        from websockets.sync.client import connect

        ws = connect(
            self.daphne.ws_url("/ws/notifications/"),
            additional_headers={"Cookie": self.session_cookie(user)},
            origin=self.daphne.url,
            open_timeout=10,
        )
        return Socket(self._open.enter_context(ws))

    def http(
        self, method: str, path: str, user=None, *, body: dict | None = None
    ) -> tuple[int, Any]:
        """A JSON request to daphne as ``user`` (session cookie, CSRF token); (status, JSON)."""
        import urllib.error
        import urllib.request

        csrf = uuid.uuid4().hex  # a 32-character secret, sent as cookie and header
        cookies = [f"{settings.CSRF_COOKIE_NAME}={csrf}"]
        if user is not None:
            cookies.append(self.session_cookie(user))
        request = urllib.request.Request(
            self.daphne.url + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={
                "Cookie": "; ".join(cookies),
                "X-CSRFToken": csrf,
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def wait_for_run(self, run_id: int, timeout: float = 60.0):
        """The run once it ended (polling the database; the worker writes it)."""
        from agents.models import AgentRun

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = AgentRun.objects.get(pk=run_id)
            if run.is_terminal:
                return run
            time.sleep(0.1)
        raise TimeoutError(f"run {run_id} did not end:\n{self.worker.log_text()[-5000:]}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._open.close()


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def scripted_model() -> Iterator[Any]:
    from agents.llm.scripted import ScriptedServer

    with ScriptedServer() as server:
        yield server


def _started(process: _Process) -> Iterator[_Process]:
    process.start()
    try:
        yield process
    finally:
        process.stop()
        with contextlib.suppress(OSError):
            process.log_path.unlink()


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, scripted_model) -> Iterator[WorkerProcess]:
    env = process_env(OPENAI_BASE_URL=scripted_model.base_url, OPENAI_MODEL="default-scripted")
    yield from _started(WorkerProcess(env))


@pytest.fixture(scope="session")
def daphne_server(django_db_setup, scripted_model) -> Iterator[DaphneProcess]:
    env = process_env(OPENAI_BASE_URL=scripted_model.base_url, OPENAI_MODEL="default-scripted")
    yield from _started(DaphneProcess(env))


@pytest.fixture
def live_stack(transactional_db, scripted_model, celery_worker, daphne_server):
    for process in (celery_worker, daphne_server):
        process.print_new_log()  # skip what earlier tests logged
        if not process.alive:
            process.start()
    # Between live tests the session worker takes no tasks: tests without a worker enqueue
    # runs too, and expect nobody to pick them up.
    celery_worker.resume()
    stack = LiveStack(scripted_model, celery_worker, daphne_server)
    yield stack
    stack.close()
    if celery_worker.alive:
        celery_worker.pause()
    # What this test left on the session's queue (a run it queued for a paused worker, a
    # summary enqueued as it ended) must not run in the next live test, on flushed data.
    queue_purge(celery_worker.queue)
    for process in (celery_worker, daphne_server):
        process.print_new_log()


@pytest.fixture
def spawn_worker(django_db_setup, scripted_model):
    started: list[WorkerProcess] = []

    def spawn(*, concurrency: int = 20, **extra_env: str) -> WorkerProcess:
        env = process_env(OPENAI_BASE_URL=scripted_model.base_url, **extra_env)
        started.append(WorkerProcess(env, concurrency=concurrency).start())
        return started[-1]

    yield spawn
    for process in started:
        process.stop()
        process.print_new_log()


@pytest.fixture
def spawn_daphne(django_db_setup, scripted_model):
    started: list[DaphneProcess] = []

    def spawn(**extra_env: str) -> DaphneProcess:
        env = process_env(OPENAI_BASE_URL=scripted_model.base_url, **extra_env)
        started.append(DaphneProcess(env).start())
        return started[-1]

    yield spawn
    for process in started:
        process.stop()
        process.print_new_log()


@pytest.fixture
def spawn_beat(django_db_setup):
    """``spawn(**env)``: a started celery beat (stopped at the end of the test)."""
    started: list[BeatProcess] = []

    def spawn(**extra_env: str) -> BeatProcess:
        started.append(BeatProcess(process_env(**extra_env)).start())
        return started[-1]

    yield spawn
    for process in started:
        process.stop()
        process.print_new_log()
