"""One object per process, made on first use and made again in a forked child.

A forked child inherits its parent's objects but none of their threads: an event loop whose
thread is gone, an executor that counts its threads idle although none exists here, a
server that no longer listens, a pool whose sockets are the parent's. Each object the
project keeps one of per process and that owns a thread or a socket is held by a
``PerProcess``, so that rule is written once:

    _threads = PerProcess(lambda: DatabaseThreads(settings.AGENT_DATABASE_THREADS))
    ...
    _threads.get().call(...)

The object is made under a lock, so two threads asking at once share one. The lock is made
anew in a forked child: a fork taken while another thread held it would leave the child a
lock nobody can release.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

_T = TypeVar("_T")


class PerProcess(Generic[_T]):
    """This process's ``make()``, made on first use (``get``)."""

    def __init__(self, make: Callable[[], _T]) -> None:
        self._make = make
        self._lock = threading.Lock()
        # The process that made the object, with it: read and replaced as one reference,
        # so a reader never pairs one process's id with another's object.
        self._held: tuple[int, _T] | None = None
        os.register_at_fork(after_in_child=self._renew_lock)

    def get(self) -> _T:
        """This process's object, made now if this process has none yet."""
        held = self._held
        if held is not None and held[0] == os.getpid():
            return held[1]
        with self._lock:
            held = self._held
            if held is None or held[0] != os.getpid():
                held = self._held = (os.getpid(), self._make())
            return held[1]

    def current(self) -> _T | None:
        """This process's object if it made one; None otherwise (nothing is made)."""
        held = self._held
        return held[1] if held is not None and held[0] == os.getpid() else None

    def take(self) -> _T | None:
        """Forget this process's object and return it, for the caller to close (None: it
        made none); the next ``get`` makes another."""
        with self._lock:
            held, self._held = self._held, None
        return held[1] if held is not None and held[0] == os.getpid() else None

    def _renew_lock(self) -> None:
        self._lock = threading.Lock()
