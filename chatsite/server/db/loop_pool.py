"""PostgreSQL connections of the process's event loop, for the run driver's stored steps.

A worker drives its runs on the process loop (``chatsite/server/loop.py``). A write handed
to a database thread is checked out of Django's pool, run through Django's cursor and handed
back; for a statement PostgreSQL runs in a fraction of a millisecond that journey cost the
worker about as much CPU again (docs/performance.md#loop-writes). The run store's PostgreSQL
statements are plain SQL, each with its own commit and no ORM in it, so the loop sends them
itself, on a small pool of psycopg's async connections.

Only such statements come here, each with its own commit; everything else keeps Django's
connections. Errors are psycopg's own, not Django's. Whether a process uses the pool is
its setting (``AGENT_LOOP_DATABASE_CONNECTIONS``, 0 for none); which database the
statements suit is the caller's to know (the run store asks the capability).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection

from chatsite.server.loop import on_process_loop, process_loop
from chatsite.server.per_process import PerProcess


class _OpeningPool(NamedTuple):
    pool: Any  # psycopg_pool's AsyncConnectionPool, imported when first used
    # Runs that arrive while it opens wait for the same opening, not a pool of their own.
    opened: asyncio.Future[None]


def _new_pool() -> _OpeningPool:
    """Made on the loop (``fetch_all`` asserts it), where the opening is scheduled."""
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        kwargs=_connect_kwargs(),
        min_size=1,
        max_size=settings.AGENT_LOOP_DATABASE_CONNECTIONS,
        timeout=settings.DATABASE_POOL_TIMEOUT,
        check=_check,
        open=False,
    )
    atexit.register(_close_at_exit)
    return _OpeningPool(pool, asyncio.ensure_future(pool.open()))


# A forked child inherits the pool object but not its connections' sockets: it opens its own.
_pools = PerProcess(_new_pool)


def available() -> bool:
    """Whether this process sends statements from its loop (it has connections for them)."""
    return settings.AGENT_LOOP_DATABASE_CONNECTIONS > 0


async def fetch_all(sql: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Run ``sql`` as a statement of its own (autocommit) and return its rows."""
    assert on_process_loop(), "the loop's connections are used on the loop only"
    pool = await _open_pool()
    async with pool.connection() as conn:
        cursor = await conn.execute(sql, params, prepare=_prepares())
        return await cursor.fetchall()


async def close() -> None:
    """Close this process's connections (a worker shutting down)."""
    opening = _pools.take()
    if opening is not None:
        await opening.pool.close(timeout=2)


async def _open_pool() -> Any:
    opening = _pools.get()
    await opening.opened
    return opening.pool


def _close_at_exit() -> None:
    # The loop's thread is a daemon: without this its connections' tasks are torn down
    # half-way at exit, and asyncio logs each as destroyed while pending.
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(close(), process_loop()).result(timeout=3)


def _prepares() -> bool:
    # Behind a pooler that cannot keep prepared statements, nothing is prepared (prepared.py).
    return settings.DATABASES["default"].get("OPTIONS", {}).get("prepare_threshold") is not None


def _connect_kwargs() -> dict[str, Any]:
    """Django's own connection parameters, with the session settings Django applies itself
    (the time zone, so ``created_at`` comes back as Django's connections return it)."""
    params = dict(connection.get_connection_params())
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    options = params.pop("options", "")
    time_zone = f"-c TimeZone={connection.timezone_name}"
    params["options"] = f"{options} {time_zone}".strip()
    params["autocommit"] = True
    params["prepare_threshold"] = 0 if _prepares() else None
    return params


async def _check(conn: Any) -> None:
    """As ``chatsite/server/db/postgres/base.py`` checks Django's pooled connections: a round
    trip only if the server wrote to the connection while it was idle (a FATAL message, a reset)."""
    from chatsite.server.db.postgres.base import has_something_to_read

    if conn.closed:
        raise conn.OperationalError("the pooled connection is closed")
    if has_something_to_read(conn.pgconn.socket):
        await conn.execute("")
