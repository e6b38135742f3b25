"""``manage.py serve`` starts the whole app, restarts a child that dies, and SIGTERM stops
every process it started."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psutil
import pytest
from django.contrib.auth import get_user_model

from tests.processes import BASE_DIR, process_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def test_serve_with_embedded_redis_restarts_a_dead_worker_and_stops_cleanly():
    port = _free_port()
    env = process_env()
    del env["REDIS_URL"]  # serve starts its own Redis
    with tempfile.TemporaryFile() as log:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--concurrency", "4"],
            cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:

            def output() -> str:
                log.seek(0)
                return log.read().decode(errors="replace")

            deadline = time.monotonic() + 90
            while not (_port_open(port) and " ready." in output()):
                assert serve.poll() is None, output()
                assert time.monotonic() < deadline, output()
                time.sleep(0.2)
            started = psutil.Process(serve.pid).children(recursive=True)

            text = output()
            assert f"chatsite is at http://localhost:{port}/" in text
            assert "REDIS_URL is unset: started an embedded Redis" in text
            assert "Created the first user: admin / " in text
            admin = get_user_model().objects.get(username="admin")
            assert admin.is_superuser
            # daphne, the celery worker, celery beat and Redis.
            names = " ".join(" ".join(p.cmdline()) for p in started)
            assert "daphne" in names
            assert "chatsite worker" in names
            assert "chatsite beat" in names
            assert "redis" in names

            # A worker that dies (OOM kill, or Celery exiting when Redis restarts) comes back.
            (worker,) = [p for p in started if "chatsite worker" in " ".join(p.cmdline())]
            worker.kill()
            deadline = time.monotonic() + 90
            while output().count(" ready.") < 2:
                assert serve.poll() is None, output()
                assert time.monotonic() < deadline, output()
                time.sleep(0.2)
            text = output()
            assert "serve: celery exited with code -9; restarting it in 1 s" in text
            assert "serve: restarted celery (pid " in text
            started = psutil.Process(serve.pid).children(recursive=True)
            assert worker.pid not in [p.pid for p in started]

            serve.send_signal(signal.SIGTERM)
            assert serve.wait(timeout=60) == 0, output()
            _, alive = psutil.wait_procs(started, timeout=10)
            assert alive == []
            assert not _port_open(port)
        finally:
            # Whatever happened, leave no process behind.
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in psutil.Process(serve.pid).children(recursive=True):
                    child.kill()
            if serve.poll() is None:
                serve.kill()
                serve.wait()
