"""The run driver's database threads (``DatabaseThreads``): calls leave the event loop, and a
thread gives its connection back once no call is queued behind it."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from agents.runs.threads import DatabaseThreads

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 30  # a ceiling for waits, never a measurement


def _in_a_thread() -> tuple[int, bool]:
    get_user_model().objects.count()  # opens this thread's connection
    return threading.get_ident(), connection.connection is not None


def _holds_a_connection() -> bool:
    return connection.connection is not None


def test_calls_run_off_the_loop_and_give_their_connection_back_when_idle():
    threads = DatabaseThreads(1)

    async def main():
        ran_on, connected = await threads.call(_in_a_thread)
        return threading.get_ident(), ran_on, connected, await threads.call(_holds_a_connection)

    loop_thread, ran_on, connected, still_holds = asyncio.run(main())
    assert ran_on != loop_thread
    assert connected  # the call had its connection
    assert not still_holds  # nothing was queued behind it: given back


def test_an_error_reaches_the_caller():
    threads = DatabaseThreads(1)

    def fail():
        raise LookupError("no such run")

    async def main():
        await threads.call(fail)

    with pytest.raises(LookupError, match="no such run"):
        asyncio.run(main())


def test_a_call_cancelled_before_it_ran_does_not_keep_the_connection_held():
    threads = DatabaseThreads(1)
    gate = threading.Event()

    def wait_at_the_gate():
        gate.wait(WAIT)
        return _in_a_thread()

    async def main():
        first = asyncio.ensure_future(threads.call(wait_at_the_gate))
        second = asyncio.ensure_future(threads.call(_holds_a_connection))
        await asyncio.sleep(0)
        second.cancel()  # its run went away while it waited for the one thread
        gate.set()
        await asyncio.wait_for(first, WAIT)
        return await threads.call(_holds_a_connection)

    assert asyncio.run(main()) is False
