"""The database threads: where the run driver's ORM writes wait for the database.

A few threads make the database calls of every run a process drives, so the event loop
never blocks on one. Each keeps its connection while more calls are queued behind it, and
gives it back (to the pool, or closed) once the queue is empty: under load a write costs no
connect, and an idle worker holds no connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection

from chatsite.server.per_process import PerProcess

_T = TypeVar("_T")


class DatabaseThreads:
    def __init__(self, size: int) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=size, thread_name_prefix="chatsite-db"
        )
        self._lock = threading.Lock()
        self._queued = 0

    async def call(self, function: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        with self._lock:
            self._queued += 1
        future = self._executor.submit(self._run, function, args, kwargs)
        future.add_done_callback(self._forget_if_cancelled)
        return await asyncio.wrap_future(future)

    def _forget_if_cancelled(self, future: concurrent.futures.Future[Any]) -> None:
        # Cancelled before a thread took it (its run was cancelled): it will not count down.
        if future.cancelled():
            with self._lock:
                self._queued -= 1

    def _run(
        self, function: Callable[..., _T], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> _T:
        failed = True
        try:
            result = function(*args, **kwargs)
            failed = False
            return result
        finally:
            with self._lock:
                self._queued -= 1
                idle = self._queued == 0
            if failed or idle:
                connection.close()


# A forked child inherits the parent's executor but not its threads, and the executor,
# counting them idle, would queue a call where no thread ever takes it: it makes its own.
_threads = PerProcess(lambda: DatabaseThreads(settings.AGENT_DATABASE_THREADS))


async def in_database_thread(function: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """``function(*args, **kwargs)`` on one of the process's database threads, awaited."""
    return await _threads.get().call(function, *args, **kwargs)
