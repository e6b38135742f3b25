"""chatsite/server/db/prepared.py: the run path's plain SQL, prepared once per connection on
PostgreSQL."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from chatsite.server.db.prepared import prepared_cursor

pytestmark = pytest.mark.django_db

# A statement no other code sends, so its row in pg_prepared_statements is this test's.
PROBE = "SELECT %s + 1 AS prepared_probe"


def _prepared_probe_plans() -> tuple[int, int] | None:
    """How many of the probe's executions on this connection used the generic plan and how
    many a plan of their own values; None if it was never prepared here."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            ["%prepared_probe%"],
        )
        return cursor.fetchone()


def test_a_statement_is_prepared_on_postgresql_and_sent_as_is_elsewhere():
    results = []
    for value in (1, 2, 3):
        with prepared_cursor() as cursor:
            cursor.execute(PROBE, [value])
            results.append(cursor.fetchone()[0])
    assert results == [2, 3, 4]
    if connection.vendor == "postgresql":
        # One prepared statement on this connection, executed three times, each on the one
        # generic plan: PostgreSQL's own choice would plan the first five for their values.
        assert _prepared_probe_plans() == (3, 0)
    else:
        with prepared_cursor() as cursor, connection.cursor() as plain:
            assert type(cursor.cursor) is type(plain.cursor)


def test_turned_off_it_is_djangos_own_cursor():
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's; elsewhere it is always Django's")
    connection.ensure_connection()
    raw = connection.connection
    kept = raw.prepare_threshold
    raw.prepare_threshold = None  # what DATABASE_PREPARED_STATEMENTS=false sets
    try:
        with prepared_cursor() as cursor, connection.cursor() as plain:
            assert type(cursor.cursor) is type(plain.cursor)
            cursor.execute(PROBE, [41])
            assert cursor.fetchone()[0] == 42
        assert _prepared_probe_plans() is None
    finally:
        raw.prepare_threshold = kept


def test_its_statements_are_counted_and_its_errors_are_djangos():
    User.objects.create(username="taken")
    users = connection.ops.quote_name(User._meta.db_table)
    with CaptureQueriesContext(connection) as queries, prepared_cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {users} WHERE username = %s", ["taken"])
        assert cursor.fetchone()[0] == 1
    assert len(queries) == 1
    assert "username = 'taken'" in queries[0]["sql"]
    kinds = connection.ops.quote_name(ContentType._meta.db_table)
    insert = f"INSERT INTO {kinds} (app_label, model) VALUES (%s, %s)"
    with pytest.raises(IntegrityError), transaction.atomic(), prepared_cursor() as cursor:
        cursor.execute(insert, ["auth", "user"])  # already there
    # The connection is usable afterwards, and the failed statement wrote nothing.
    assert ContentType.objects.filter(app_label="auth", model="user").count() == 1
