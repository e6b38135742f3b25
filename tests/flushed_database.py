"""Long-lived test processes and a database that is flushed under them.

The worker and daphne the suite starts live for the whole session, while every
``transaction=True`` test ends with a flush that deletes the content types and creates them
again under new ids. Django caches content types per process (``ContentType.objects``), so
a daphne that cached one before a flush would write the admin's log with an id that no
longer exists (a ForeignKeyViolation, a 500 on the next admin save). Production never
flushes, so the cache stays on there; in the suite's processes it is cleared as each
request starts.

The flush itself, a ``TRUNCATE`` of every table, takes its locks table by table, while the
session's worker reads some of the same tables every second (its sweeper joins the tool
approvals to their runs). PostgreSQL can find the two waiting on each other and end the
flush with "deadlock detected"; the flush is its own transaction, rolled back whole, so it
is run again (``flush_retried_on_deadlock``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.db import OperationalError

FLUSH_ATTEMPTS = 5
DEADLOCK_DETECTED = "40P01"  # PostgreSQL's SQLSTATE


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
            except OperationalError as error:
                deadlock = getattr(error.__cause__, "sqlstate", None) == DEADLOCK_DETECTED
                if not deadlock or attempt == FLUSH_ATTEMPTS:
                    raise

    return retried
