"""A cursor whose statements PostgreSQL parses and plans once per connection.

Django's psycopg cursors bind parameters on the client: every statement reaches PostgreSQL
as text, which it parses, analyses and plans again at each execution. For the run path's
plain-SQL statements (the fenced appends, the claim, a send's lock) that parsing and
planning was most of what the backend spent on them (docs/performance.md#prepared-statements).
The ORM's own queries keep Django's cursor: they are many shapes, each run
rarely, and server-side binding changes how some of them are typed.

The statements are prepared by psycopg on first use and kept per connection (its
``prepare_threshold``, set from ``DATABASE_PREPARED_STATEMENTS``). Behind a pooler that
cannot keep a connection's prepared statements (PgBouncer in transaction mode before 1.21),
turn that setting off: this cursor is then Django's own. Elsewhere than on PostgreSQL it
is Django's own too.

Queries through it are counted and logged as Django's are (``CaptureQueriesContext``), and
its errors are Django's (``IntegrityError``, ``OperationalError``).
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper


def prepared_cursor() -> CursorWrapper:
    """Use as ``connection.cursor()``: ``with prepared_cursor() as cursor: ...``."""
    db = connections[DEFAULT_DB_ALIAS]  # the thread's own, looked up once
    db.close_if_health_check_failed()
    db.ensure_connection()
    raw = db.connection
    # Only psycopg's connections prepare statements (SQLite's have no such attribute), and
    # only while the setting asks them to.
    if getattr(raw, "prepare_threshold", None) is None:
        return db.cursor()
    # Imported here: the module needs psycopg, which an SQLite-only install may not have.
    from django.db.backends.postgresql.base import ServerBindingCursor

    binding: Any = ServerBindingCursor  # psycopg's Cursor(connection); the stubs know no args
    with db.wrap_database_errors:
        cursor = binding(raw)
    db.validate_thread_sharing()
    if db.queries_logged:
        return _LoggedCursor(cursor, db)
    return CursorWrapper(cursor, db)


class _LoggedCursor(CursorDebugWrapper):
    """Logs each statement with its values in, as Django's cursor does. Django reads that
    text back from a client-binding cursor; this one sends the values apart."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return CursorWrapper.execute(self, sql, params)
