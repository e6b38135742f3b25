"""Long-lived test processes and a database that is flushed under them.

The worker and daphne the suite starts live for the whole session, while every
``transaction=True`` test ends with a flush that deletes the content types and creates them
again under new ids. Django caches content types per process (``ContentType.objects``), so
a daphne that cached one before a flush would write the admin's log with an id that no
longer exists (a ForeignKeyViolation, a 500 on the next admin save). Production never
flushes, so the cache stays on there; in the suite's processes it is cleared as each
request starts.

On PostgreSQL the flush deletes the rows instead of Django's ``TRUNCATE`` of every table
(``flushed_by_delete``). A test leaves a few rows in a few tables, and deleting those is
cheap, while a ``TRUNCATE`` gives each of the tables and their indexes new files: several
hundred tests of the suite end with a flush, and that made the flushes a large part of the
suite's time (``make test`` prints the slowest teardowns). What a test sees after a flush is
the same: no rows, the same sequences (neither way restarts them, unless a test asks with
``reset_sequences``, which keeps Django's statement).

The flush takes its row locks table by table, while the session's worker reads and writes
some of the same tables (its sweeper locks the runs it takes over; a run that ends writes
its notification). PostgreSQL can find the two waiting on each other and end the flush with
"deadlock detected", or a row the worker committed after the flush emptied its table still
refers to a row the flush deleted, and the flush's foreign keys fail at its commit. Either
way the flush is its own transaction, rolled back whole, so it is run again, and then
deletes the worker's row too (``flush_retried_on_deadlock``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, OperationalError

FLUSH_ATTEMPTS = 5
# PostgreSQL's SQLSTATEs of a flush that lost a race with the session's worker.
DEADLOCK_DETECTED = "40P01"
FOREIGN_KEY_VIOLATION = "23503"
RACES = (DEADLOCK_DETECTED, FOREIGN_KEY_VIOLATION)


def forget_content_types_per_request() -> None:
    from django.core.signals import request_started

    def clear(**_: Any) -> None:
        from django.contrib.contenttypes.models import ContentType

        ContentType.objects.clear_cache()

    request_started.connect(clear, weak=False, dispatch_uid="tests-forget-content-types")


def flush_retried_on_deadlock(flush: Callable[[Any, list[str]], None]) -> Callable[..., None]:
    """``flush`` (``execute_sql_flush``), run again when PostgreSQL ends it as one side of
    a deadlock; any other failure, or a deadlock at every attempt, is raised."""

    @functools.wraps(flush)
    def retried(operations: Any, sql_list: list[str]) -> None:
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                return flush(operations, sql_list)
            except (OperationalError, IntegrityError) as error:
                lost_a_race = getattr(error.__cause__, "sqlstate", None) in RACES
                if not lost_a_race or attempt == FLUSH_ATTEMPTS:
                    raise

    return retried


def flushed_by_delete(sql_flush: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """PostgreSQL's ``sql_flush`` as one transaction's ``DELETE`` of every table's rows.

    The foreign keys Django creates on PostgreSQL are checked at commit, so the order of the
    deletes does not matter; ``SET CONSTRAINTS`` also defers any that would be checked at
    once. Django's own statement is kept where a caller asks for more than emptied tables.
    """

    @functools.wraps(sql_flush)
    def flush(
        operations: Any,
        style: Any,
        tables: list[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or allow_cascade or not tables:
            return sql_flush(
                operations,
                style,
                tables,
                reset_sequences=reset_sequences,
                allow_cascade=allow_cascade,
            )
        deletes = "".join(f"DELETE FROM {operations.quote_name(table)};" for table in tables)
        return ["SET CONSTRAINTS ALL DEFERRED;" + deletes]

    return flush
