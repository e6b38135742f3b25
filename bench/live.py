"""Shared set-up for the load benchmarks: real processes on your own database and Redis DB.

A benchmark imports this module first. It points Django at ``DATABASE_URL`` (default
``postgres://postgres@127.0.0.1:5432/chatsite_ops``) and ``REDIS_URL`` (default
``redis://127.0.0.1:6379/10``), migrates that database, and starts on loopback what
production runs: one ``celery worker -P threads`` and one ``daphne``, both from
``tests/processes.py``. Only the model is scripted, in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/chatsite_ops")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/10")
os.environ.setdefault("CHATSITE_VAR_DIR", "/tmp/chatsite-bench")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

import django  # noqa: E402

django.setup()
# A SIGTERM (timeout, kill) still runs the finally blocks that stop the worker and daphne.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

import psutil  # noqa: E402
from django.core.management import call_command  # noqa: E402

from agents.llm.scripted import Reply, ScriptedServer  # noqa: E402
from tests.processes import WORKER_ENV, DaphneProcess, WorkerProcess, process_env  # noqa: E402

ACTION = "Thought: I should add.\nAction: calculator\nAction Input: {n}+1"
FINAL = "Thought: I know it now.\nFinal Answer: done after {n} steps."


def migrate() -> None:
    call_command("migrate", verbosity=0, interactive=False)
    from agents.services.defaults import ensure_defaults

    ensure_defaults()


def stepping_policy(tool_calls: int, delay: float):
    """Answer every call after ``delay`` seconds: ``tool_calls`` calculator actions, then the
    final answer. The count comes from the request, so concurrent runs need no state."""

    def answer(body: dict) -> Reply:
        # The thought of each scripted action appears once per action already taken (the
        # prompt's own format instructions mention "Observation:", so that is not counted).
        seen = json.dumps(body.get("messages", [])).count("I should add.")
        if seen < tool_calls:
            return Reply(ACTION.format(n=seen), delay=delay)
        return Reply(FINAL.format(n=seen), delay=delay)

    return answer


def make_profile(model_server: ScriptedServer, model: str):
    from agents.models import AgentProfile, ModelConfig, ToolConfig

    config = ModelConfig.objects.create(
        name=f"bench {model}", base_url=model_server.base_url, model=model
    )
    config.set_api_key("bench-key")
    config.save()
    profile = AgentProfile.objects.create(
        name=model, slug=model, model_config=config, max_execution_time=600.0
    )
    profile.tools.set(ToolConfig.objects.filter(name="calculator"))
    return profile


def make_user(name: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username=f"{name}-{uuid.uuid4().hex[:8]}")


def session_cookie(user) -> str:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}"


def production_env(model_server: ScriptedServer, **extra: str) -> dict[str, str]:
    """The environment of a benchmark's processes: the suite's, less the shortened worker
    timings of tests/processes.py (``WORKER_ENV``), so chatsite/settings.py's defaults apply:
    what production gets."""
    env = process_env(OPENAI_BASE_URL=model_server.base_url, CHAT_SENDS_PER_MINUTE="0", **extra)
    for name in WORKER_ENV:
        if name not in extra:
            env.pop(name, None)
    return env


def service_cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of the database and Redis servers, and of this process (the
    scripted model and the bench's clients), for comparing with the worker and daphne."""
    totals = {"postgres": 0.0, "redis": 0.0, "bench": cpu_seconds(os.getpid())}
    for proc in psutil.process_iter(["name"]):
        name = proc.info["name"] or ""
        key = "postgres" if name.startswith("postgres") else "redis" if "redis" in name else None
        if key:
            with contextlib.suppress(psutil.Error):
                totals[key] += cpu_seconds(proc.pid)
    return totals


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


@contextlib.contextmanager
def stack(
    model_server: ScriptedServer, *, concurrency: int, **extra_env: str
) -> Iterator[tuple[Any, Any]]:
    """One worker (threads pool, ``concurrency`` threads) and one daphne."""
    env = production_env(model_server, **extra_env)
    worker = WorkerProcess(env, concurrency=concurrency)
    daphne = DaphneProcess(env)
    worker.start()
    daphne.start()
    try:
        yield worker, daphne
    finally:
        worker.stop()
        daphne.stop()


class PeakRss:
    """Samples the resident set size of some processes (and their children) until stopped.

    The children are found once, at the start: listing them scans every process on the
    machine, and doing that ten times a second cost the benchmark's own process about as
    much CPU as daphne spends per run.
    """

    def __init__(self, **pids: int) -> None:
        self.pids = pids
        self.peak = dict.fromkeys(pids, 0)
        self._processes: dict[str, list[psutil.Process]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRss:
        for name, pid in self.pids.items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                self._processes[name] = [proc, *proc.children(recursive=True)]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            for name, processes in self._processes.items():
                rss = 0
                for proc in processes:
                    with contextlib.suppress(psutil.Error):
                        rss += proc.memory_info().rss
                self.peak[name] = max(self.peak[name], rss)


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(values: list[float]) -> str:
    return (
        f"p50 {percentile(values, 50) * 1000:.1f} ms, p95 {percentile(values, 95) * 1000:.1f} ms,"
        f" p99 {percentile(values, 99) * 1000:.1f} ms (n={len(values)})"
    )


def cpu_ms_per_call(call: Callable[[], object], calls: int, warmup: int = 20) -> float:
    """This process's CPU per call of ``call``, in ms, after ``warmup`` calls not counted."""
    for _ in range(warmup):
        call()
    began = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - began) * 1000 / calls


def alternating_rounds(
    ways: Mapping[str, Callable[[], float]], rounds: int
) -> dict[str, list[float]]:
    """Each way's figure per round, the ways taking turns in alternating order, so that a
    machine growing busier or quieter weighs on all of them alike."""
    spent: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for round_number in range(rounds):
        for name in names if round_number % 2 == 0 else reversed(names):
            spent[name].append(ways[name]())
    return spent


def print_medians(title: str, spent: dict[str, list[float]]) -> None:
    print(title)
    width = max(len(name) for name in spent)
    for name, values in spent.items():
        rounds = ", ".join(f"{value:.3f}" for value in values)
        print(f"  {name:{width}s}  median {statistics.median(values):.3f}  ({rounds})")


# Browsers do not open hundreds of sockets in the same millisecond; a burst that large
# overflows daphne's listen backlog. Handshakes are spread over this many at a time.
HANDSHAKES_AT_ONCE = 20
_handshakes: asyncio.Semaphore | None = None
handshake_retries = 0


async def open_socket(url: str, cookie: str, origin: str):
    global _handshakes
    if _handshakes is None:
        _handshakes = asyncio.Semaphore(HANDSHAKES_AT_ONCE)
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidHandshake

    global handshake_retries
    async with _handshakes:
        for attempt in range(5):
            try:
                return await connect(
                    url, additional_headers={"Cookie": cookie}, origin=origin,
                    open_timeout=120, max_size=None,
                )  # fmt: skip
            except (OSError, InvalidHandshake):
                # daphne drops a handshake its app did not accept within 5 s; browsers
                # reconnect, and so does this client (counted in handshake_retries).
                if attempt == 4:
                    raise
                handshake_retries += 1
                await asyncio.sleep(1 + attempt)


def run_async(coro):
    global _handshakes
    _handshakes = None  # a semaphore belongs to one event loop
    return asyncio.run(coro)


__all__ = [
    "ROOT",
    "PeakRss",
    "make_profile",
    "make_user",
    "migrate",
    "percentile",
    "production_env",
    "rss_mb",
    "run_async",
    "session_cookie",
    "stack",
    "statistics",
    "stepping_policy",
    "summary_ms",
    "time",
]
