"""Django's PostgreSQL backend, with a cheaper check of a connection taken from the pool.

Django's own check (``CONN_HEALTH_CHECKS`` with a pool) sends an empty query at every
check-out, and the run path checks a connection out for nearly every write: a worker's
database threads give theirs back whenever no write is queued, a socket's calls after each
one. That round trip cost more client and server CPU than some of the statements it guarded
(docs/performance.md#pool-check).

A pooled connection sits idle with nothing to read. A backend that was terminated, a server
that restarted and a connection reset on the way all make its socket readable (the server's
FATAL message, the end of the stream, the reset), so a socket with nothing to read is used as
it is, and one with anything to read gets the full check: the empty query, which fails for a
dead connection (it is then given back closed, the pool drops it, and another is taken) and
reads any notice that was waiting. What this cannot see is a peer gone without a word (a
cable pulled); the first statement then fails as it would have after a successful check a
moment earlier.

``settings.py`` uses this engine, with the pool's own check off, whenever it sets a pool.
"""

from __future__ import annotations

import select
from typing import Any

from django.db.backends.postgresql import base
from psycopg import Connection, Error
from psycopg.pq import ConnStatus


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Connection[Any]:
        # Each dead connection is dropped from the pool on its way back, so this ends once
        # the pool has opened a new one (or getconn gives up after the pool's timeout).
        while True:
            connection = super().get_new_connection(conn_params)
            if self.pool is None or connection_is_sound(connection):
                return connection
            connection.close()
            self.pool.putconn(connection)


def connection_is_sound(connection: Connection[Any]) -> bool:
    """Whether ``connection`` can be used; a round trip only if the server said something."""
    if connection.closed or connection.pgconn.status != ConnStatus.OK:
        return False
    if not has_something_to_read(connection.pgconn.socket):
        return True
    try:
        connection.execute("")
    except Error:
        return False
    return True


def has_something_to_read(fd: int) -> bool:
    """Whether the socket ``fd`` has data (or an end, or a reset) waiting; never blocks."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))
