"""Keep a few child processes running: restart one that dies, with backoff, until told to stop.

``manage.py serve`` runs daphne and a Celery worker through this. A child can die for reasons
that pass: the Celery worker exits on its own when Redis restarts under it, and an OOM kill or
a crash takes one process, not the app. Restarting it at once could spin on a fault that lasts
(a port taken, a database down), so each quick death doubles the wait before the next start,
up to ``max_delay``; a child that stayed up for ``stable_after`` seconds starts again from
``base_delay``.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RestartPolicy:
    base_delay: float = 1.0
    max_delay: float = 30.0
    stable_after: float = 60.0

    def delay(self, *, quick_deaths: int) -> float:
        """Seconds to wait before restarting a child that died ``quick_deaths`` times in a row
        without staying up for ``stable_after`` seconds (1 for the first death)."""
        return min(self.max_delay, self.base_delay * 2 ** max(0, quick_deaths - 1))


@dataclass
class Child:
    name: str
    command: list[str]
    env: dict[str, str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None
    restarts: int = 0


Spawn = Callable[[list[str], dict[str, str]], subprocess.Popen]


def _spawn(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    # Own process group: Ctrl-C in the terminal reaches the supervisor once, and it stops the
    # children in order.
    return subprocess.Popen(command, env=env, start_new_session=True)  # noqa: S603


class LogStream(Protocol):
    """Where the supervisor's lines go: a text stream, or a management command's stderr."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> None: ...


class Supervisor:
    def __init__(
        self,
        children: list[Child],
        *,
        log: LogStream,
        policy: RestartPolicy | None = None,
        spawn: Spawn = _spawn,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.children = children
        self.log = log
        self.policy = policy or RestartPolicy()
        self._spawn = spawn
        self._clock = clock
        self.stopping = False

    def start(self) -> None:
        for child in self.children:
            self._start(child)

    def request_stop(self, *_: object) -> None:
        self.stopping = True

    def run(self, poll_interval: float = 0.2) -> None:
        """Start every child, keep them up until SIGINT/SIGTERM, then stop them all."""
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGTERM, self.request_stop)
        try:
            self.start()
            while not self.stopping:
                self.check()
                time.sleep(poll_interval)
        finally:
            self.stop()

    def check(self) -> None:
        """Notice children that died and start the ones whose wait is over."""
        now = self._clock()
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restart_at = None
                    child.restarts += 1
                    self._start(child)
                continue
            assert child.process is not None
            code = child.process.poll()
            if code is None:
                continue
            if now - child.started_at >= self.policy.stable_after:
                child.quick_deaths = 0
            child.quick_deaths += 1
            wait = self.policy.delay(quick_deaths=child.quick_deaths)
            child.restart_at = now + wait
            self._say(
                f"serve: {child.name} exited with code {code}; restarting it in {wait:g} s"
                f" (quick restart {child.quick_deaths} in a row)"
            )

    def stop(self, timeout: float = 20.0) -> None:
        running = [c.process for c in self.children if c.process and c.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = self._clock() + timeout
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - self._clock()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _start(self, child: Child) -> None:
        child.process = self._spawn(child.command, child.env)
        child.started_at = self._clock()
        if child.restarts:
            self._say(f"serve: restarted {child.name} (pid {child.process.pid})")

    def _say(self, line: str) -> None:
        self.log.write(line + "\n")
        self.log.flush()
