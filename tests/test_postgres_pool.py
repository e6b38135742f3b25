"""chatsite/server/db/postgres: a pooled connection is checked without a round trip unless the
server wrote to it while it was idle."""

from __future__ import annotations

import select
import time

import psycopg
import pytest
from django.db import connection

from chatsite.server.db.postgres.base import DatabaseWrapper, connection_is_sound

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conninfo() -> str:
    if connection.vendor != "postgresql":
        pytest.skip("the pool and its check are PostgreSQL's; SQLite opens a file")
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    return psycopg.conninfo.make_conninfo(**params)


class CountingConnection(psycopg.Connection):
    """Counts what is sent, as the server would see it."""

    sent: list[str]

    def execute(self, query, *args, **kwargs):  # type: ignore[override]
        self.sent.append(str(query))
        return super().execute(query, *args, **kwargs)


def _counting(conninfo: str) -> CountingConnection:
    conn = CountingConnection.connect(conninfo, autocommit=True)
    conn.sent = []
    return conn


def _terminate(conninfo: str, pid: int) -> None:
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        # Gone from the server's list once the backend has exited (and said so on its socket).
        for _ in range(500):
            if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {pid} did not exit")


def _wait_readable(conn: psycopg.Connection) -> None:
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 10)
    assert readable, "the server did not write to the terminated backend's socket"


def test_an_idle_connection_is_used_without_a_round_trip(conninfo):
    conn = _counting(conninfo)
    try:
        conn.execute("SELECT 1")
        conn.sent.clear()
        assert connection_is_sound(conn)
        assert conn.sent == []
    finally:
        conn.close()


def test_a_terminated_backend_is_found_and_not_used(conninfo):
    conn = _counting(conninfo)
    try:
        _terminate(conninfo, conn.info.backend_pid)
        _wait_readable(conn)
        assert not connection_is_sound(conn)
        assert conn.sent == [""]  # the full check ran, and failed
    finally:
        conn.close()


def test_a_closed_connection_is_not_used(conninfo):
    conn = _counting(conninfo)
    conn.close()
    assert not connection_is_sound(conn)
    assert conn.sent == []


def test_a_waiting_notification_gets_the_full_check_and_the_connection_is_kept(conninfo):
    conn = _counting(conninfo)
    try:
        conn.execute("LISTEN chatsite_pool_probe")
        with psycopg.connect(conninfo, autocommit=True) as other:
            other.execute("NOTIFY chatsite_pool_probe")
        _wait_readable(conn)
        conn.sent.clear()
        assert connection_is_sound(conn)
        assert conn.sent == [""]
        assert conn.execute("SELECT 2").fetchone() == (2,)
    finally:
        conn.close()


def test_the_pool_replaces_a_connection_whose_backend_ended_while_it_was_idle(conninfo):
    settings_dict = {
        **connection.settings_dict,
        "ENGINE": "chatsite.server.db.postgres",
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": False,
        "OPTIONS": {**connection.settings_dict["OPTIONS"], "pool": {"min_size": 1, "max_size": 1}},
    }
    wrapper = DatabaseWrapper(settings_dict, alias="pool_probe")
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            first_pid = cursor.fetchone()[0]
        wrapper.close()  # back to the pool, idle
        _terminate(conninfo, first_pid)

        with wrapper.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            second_pid = cursor.fetchone()[0]
        assert second_pid != first_pid
    finally:
        wrapper.close()
        wrapper.close_pool()
