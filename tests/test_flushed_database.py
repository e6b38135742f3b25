"""The closing flush of a ``transaction=True`` test, run again when it deadlocks."""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError

from tests.flushed_database import FLUSH_ATTEMPTS, flush_retried_on_deadlock


def _failing(*, deadlock: bool, times: int):
    """A flush that fails its first ``times`` calls, as Django raises psycopg's error."""
    calls = []

    def flush(operations, sql_list):
        calls.append(sql_list)
        if len(calls) <= times:
            if deadlock:
                raise OperationalError("deadlock detected") from psycopg.errors.DeadlockDetected()
            raise OperationalError("server closed the connection")

    return flush, calls


def test_a_flush_ended_by_a_deadlock_is_run_again():
    flush, calls = _failing(deadlock=True, times=2)
    flush_retried_on_deadlock(flush)(None, ["TRUNCATE t"])
    assert calls == [["TRUNCATE t"]] * 3


def test_a_flush_that_deadlocks_every_time_fails_after_the_last_attempt():
    flush, calls = _failing(deadlock=True, times=FLUSH_ATTEMPTS)
    with pytest.raises(OperationalError, match="deadlock"):
        flush_retried_on_deadlock(flush)(None, ["TRUNCATE t"])
    assert len(calls) == FLUSH_ATTEMPTS


def test_any_other_failure_is_raised_at_once():
    flush, calls = _failing(deadlock=False, times=1)
    with pytest.raises(OperationalError, match="server closed"):
        flush_retried_on_deadlock(flush)(None, ["TRUNCATE t"])
    assert len(calls) == 1


def test_the_suite_flushes_through_the_retry():
    from django.db.backends.base.operations import BaseDatabaseOperations

    assert BaseDatabaseOperations.execute_sql_flush.__wrapped__.__qualname__ == (
        "BaseDatabaseOperations.execute_sql_flush"
    )
