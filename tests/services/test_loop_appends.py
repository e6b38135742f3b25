"""chatsite/server/db/loop_pool.py: the worker's event loop's own PostgreSQL connections.

What the run driver stores through them (the same rows, commits and group messages as
through the database threads) is checked in tests/services/test_runs.py, for both ways.
"""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest
from django.db import connection

from agents.react.types import ThoughtStep
from agents.runs.postgres import PostgresRunStore
from agents.runs.store import run_claim
from agents.services.conversations import conversation_create, message_send
from chatsite.server.db import loop_pool
from chatsite.server.loop import run_on_process_loop

# The loop's connections see only what is committed: every test here commits for real.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("the loop's own connections are PostgreSQL's; SQLite writes on threads")


def test_a_connection_whose_backend_ended_while_idle_is_replaced():
    def backend_pid() -> int:
        rows = run_on_process_loop(loop_pool.fetch_all("SELECT pg_backend_pid()", {}))
        return rows[0][0]

    first = backend_pid()
    params = connection.get_connection_params()
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [first])
        gone = "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)"
        for _ in range(500):
            if admin.execute(gone, [first]).fetchone()[0]:
                break
            time.sleep(0.01)

    assert backend_pid() != first


def test_runs_that_arrive_together_share_one_pool_as_it_opens():
    run_on_process_loop(loop_pool.close())

    async def together() -> list:
        return await asyncio.gather(
            *(loop_pool.fetch_all("SELECT %(n)s", {"n": n}) for n in range(20))
        )

    assert run_on_process_loop(together()) == [[(n,)] for n in range(20)]
    first_pool = loop_pool._pools.current()
    run_on_process_loop(loop_pool.fetch_all("SELECT 1", {}))
    assert loop_pool._pools.current() is first_pool is not None


def test_the_loops_connections_plan_their_statements_as_djangos_do():
    """Django's connection parameters, session settings included: the time zone, and each
    prepared statement planned once (docs/performance.md#generic-plans)."""
    rows = run_on_process_loop(
        loop_pool.fetch_all(
            "SELECT current_setting('plan_cache_mode'), current_setting('TimeZone')", {}
        )
    )
    assert rows == [("force_generic_plan", connection.timezone_name)]


def test_the_loop_sends_statements_only_when_it_has_connections_for_them(settings):
    assert loop_pool.available()
    settings.AGENT_LOOP_DATABASE_CONNECTIONS = 0
    assert not loop_pool.available()


def test_without_loop_connections_the_driver_writes_on_a_database_thread(
    settings, user, default_profile
):
    """The PostgreSQL store sends the same statement on a database thread instead."""
    settings.AGENT_LOOP_DATABASE_CONNECTIONS = 0
    queued = message_send(conversation=conversation_create(owner=user), user=user, content="q")
    run = run_claim(run_id=queued.run.pk, worker_id="w1")
    assert run is not None

    stored = run_on_process_loop(
        PostgresRunStore().arecord(run=run, steps=[ThoughtStep(text="on a thread")], worker_id="w1")
    )

    assert [event.seq for event in stored] == [2]
    assert run.events.get(seq=2).payload["text"] == "on a thread"
