"""Raw statements of the run path, with their parameters bound by PostgreSQL.

Django's PostgreSQL backend binds on the client: psycopg quotes every parameter into the
statement's text, in Python. The run path's one-statement writes (``agents/services/runs.py``)
carry whole prompts, as arrays of them, and quoting those element by element was about a
tenth of a worker's CPU per run. A cursor that sends the parameters beside the SQL skips the
quoting, and psycopg prepares a statement a connection runs often (``prepare_threshold``),
so PostgreSQL plans the fenced append once per pooled connection instead of once per step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connection
from django.db.backends.utils import CursorWrapper


@contextlib.contextmanager
def bound_cursor() -> Iterator[CursorWrapper]:
    """``connection.cursor()`` (the same error mapping, and counted by the same query log),
    whose statements have their parameters bound by the server on PostgreSQL."""
    with connection.cursor() as wrapper:
        if connection.vendor == "postgresql":
            import psycopg

            wrapper.cursor.close()
            wrapper.cursor = psycopg.Cursor(connection.connection)
        yield wrapper
