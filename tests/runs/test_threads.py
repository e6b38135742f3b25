"""The database threads in a forked child: the child inherits the parent's executor but none
of its threads (a worker that forks, mutmut's checks of each mutant in a forked process)."""

from __future__ import annotations

import asyncio
import os

from agents.runs.threads import in_database_thread
from chatsite.server.loop import process_loop

WAIT_SECONDS = 10  # a ceiling: the call takes a moment, a lost one never returns


def _on_a_database_thread(value: int) -> int:
    future = asyncio.run_coroutine_threadsafe(in_database_thread(lambda: value), process_loop())
    return future.result(timeout=WAIT_SECONDS)


def test_a_forked_child_calls_on_database_threads_of_its_own():
    assert _on_a_database_thread(1) == 1  # the parent's threads exist, and sit idle

    child = os.fork()
    if child == 0:
        try:
            code = 0 if _on_a_database_thread(2) == 2 else 1
        except BaseException:
            code = 2  # the call was queued where no thread takes it
        os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
