"""Small tools for the engine's tests (the real built-ins belong to agents/tools)."""

from __future__ import annotations

import threading
import time

from agents.react.tools import Tool, current_interrupt


class Adder(Tool):
    name = "adder"
    description = "Adds two integers."

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def run(self, *, a: int, b: int) -> str:
        self.calls.append((a, b))
        return str(a + b)


class Echo(Tool):
    name = "echo"
    description = "Repeats its input back."

    def __init__(self, *, return_direct: bool = False) -> None:
        self.return_direct = return_direct
        self.inputs: list[str] = []

    def run(self, *, text: str) -> str:
        self.inputs.append(text)
        return f"echo: {text}"


class Broken(Tool):
    name = "broken"
    description = "Always fails."

    def run(self, *, text: str) -> str:
        raise RuntimeError(f"disk on fire while reading {text!r}")


class Sleeper(Tool):
    """Sleeps, then answers; ``release`` ends a sleep early so that tests finish quickly."""

    name = "sleeper"
    description = "Waits a while."

    def __init__(self, *, seconds: float, timeout_seconds: float = 30.0) -> None:
        self.seconds = seconds
        self.timeout_seconds = timeout_seconds
        self.release = threading.Event()
        self.started = threading.Event()
        self.finished = threading.Event()
        self.calls = 0

    def run(self, *, text: str) -> str:
        self.calls += 1
        self.started.set()
        self.release.wait(self.seconds)
        self.finished.set()
        return f"slept on {text}"


class Big(Tool):
    name = "big"
    description = "Returns a long text."

    def run(self, *, size: int) -> str:
        return "x" * size


class Counter(Tool):
    """Counts its calls, and sleeps a little when asked to (to overlap parallel calls)."""

    name = "counter"
    description = "Counts."

    def __init__(self, *, pause: float = 0.0) -> None:
        self.pause = pause
        self.calls: list[str] = []
        self.running = 0
        self.max_running = 0
        self._lock = threading.Lock()

    def run(self, *, text: str) -> str:
        with self._lock:
            self.calls.append(text)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        time.sleep(self.pause)
        with self._lock:
            self.running -= 1
        return f"counted {text}"


class Interruptible(Tool):
    """Waits until the engine interrupts its call (or ``release`` is set), like a tool whose
    work can be ended early; ``interrupted`` is set when the engine told it."""

    name = "interruptible"
    description = "Waits until it is interrupted."

    def __init__(self, *, timeout_seconds: float = 30.0) -> None:
        self.timeout_seconds = timeout_seconds
        self.release = threading.Event()
        self.started = threading.Event()
        self.interrupted = threading.Event()
        self.ended = threading.Event()

    def run(self, *, text: str) -> str:
        def interrupted() -> None:
            self.interrupted.set()
            self.release.set()

        forget = current_interrupt().on_interrupt(interrupted)
        self.started.set()
        try:
            self.release.wait(60)
        finally:
            forget()
            self.ended.set()
        return f"done with {text}"
