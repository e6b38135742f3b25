"""The one asyncio event loop of each process, in a daemon thread.

A worker drives its runs on it (``agents/services/execution.py``), makes their model calls
on it (``agents/llm/client.py``) and sends their frames to Redis from it
(``agents/events.py``): between a model's reply and Redis a step changes thread only for its
database write, and no two threads take turns at the interpreter lock for one run's work.
daphne's processes use it for the sends of their requests. Other threads hand it work with
``asyncio.run_coroutine_threadsafe``; code running on it must never wait for it
synchronously (``run_on_process_loop`` refuses to).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, NamedTuple, TypeVar

try:
    import uvloop
except ImportError:  # no wheel for this platform (Windows): asyncio's own loop
    uvloop = None  # type: ignore[assignment]

from chatsite.server.per_process import PerProcess

_T = TypeVar("_T")


class _RunningLoop(NamedTuple):
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread


def _start_loop() -> _RunningLoop:
    loop = new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="chatsite-loop", daemon=True)
    thread.start()
    return _RunningLoop(loop, thread)


# A forked child inherits the loop object but not the thread running it: it starts its own.
_running = PerProcess(_start_loop)


def process_loop() -> asyncio.AbstractEventLoop:
    """This process's loop, started on first use."""
    return _running.get().loop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed, else asyncio's.

    asyncio's own loop is Python, and a run's work on it is mostly its callbacks: each chunk
    of the model's stream, each write's wait for PostgreSQL, each frame to Redis
    (docs/performance.md#uvloop)."""
    return uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()


def make_uvloop_the_default() -> None:
    """Have ``asyncio.new_event_loop()`` return uvloop's loop, for code that makes its loop
    itself (daphne, for Twisted: ``chatsite/server/process/daphne.py``)."""
    if uvloop is not None:
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def on_process_loop() -> bool:
    """Whether the caller runs on the process's loop (and so must not wait for it)."""
    running = _running.current()
    return running is not None and threading.current_thread() is running.thread


def run_on_process_loop(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` on the process's loop and wait for its result, from another thread."""
    if on_process_loop():
        coroutine.close()
        raise RuntimeError("waiting on the process loop from its own thread would never end")
    return asyncio.run_coroutine_threadsafe(coroutine, process_loop()).result()
