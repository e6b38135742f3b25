"""The process's one event loop (chatsite/server/loop.py): work handed to it from a thread, and
a wait on it from its own thread refused instead of hanging for ever."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chatsite.server.loop import on_process_loop, process_loop, run_on_process_loop
from tests.fresh_python import assert_prints_ok


async def _where() -> tuple[int, bool]:
    return threading.get_ident(), on_process_loop()


def test_work_from_a_thread_runs_on_the_loop_and_its_result_comes_back():
    loop_thread, on_loop = run_on_process_loop(_where())
    assert loop_thread != threading.get_ident()
    assert on_loop
    assert not on_process_loop()
    assert process_loop() is process_loop()


def test_waiting_on_the_loop_from_the_loop_is_refused():
    async def wait_on_myself():
        return run_on_process_loop(_where())

    future = asyncio.run_coroutine_threadsafe(wait_on_myself(), process_loop())
    with pytest.raises(RuntimeError, match="would never end"):
        future.result(timeout=10)


def test_the_process_loop_is_uvloops():
    import uvloop

    assert isinstance(process_loop(), uvloop.Loop)


def test_daphne_started_through_chatsite_daphne_runs_twisted_on_uvloop():
    # In a process of its own: importing daphne.server installs Twisted's reactor for good.
    check = (
        "import chatsite.server.process.daphne, daphne.server, uvloop;"
        "from twisted.internet import reactor;"
        "assert isinstance(daphne.server.twisted_loop, uvloop.Loop);"
        "assert reactor._asyncioEventloop is daphne.server.twisted_loop;"
        "print('ok')"
    )
    assert_prints_ok(check)
