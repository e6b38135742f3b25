"""Celery's Redis transport, with one Redis client per channel instead of one per command.

kombu's Redis channel builds a new ``redis.Redis`` for each command it sends outside its
polling connection: each task's delivery bookkeeping and its ack in the worker, each
publish in daphne. Building one copies redis-py's table of response callbacks, at every
command (docs/performance.md#broker).
The client only borrows a connection from the channel's pool per command, so one client
per pool serves every thread, as redis-py allows; pipelines are still made per use.

The override leans on the channel's ``pool`` and ``_create_client``: ``check``
(``chatsite.server.E002``) fails at start-up if kombu changes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from kombu.transport import redis

from chatsite.server.patches.targets import Target, check_for

TARGETS = (
    Target("kombu.transport.redis", "Channel.conn_or_acquire", parameters=("self", "client")),
    Target("kombu.transport.redis", "Channel._create_client", parameters=("self", "asynchronous")),
    Target("kombu.transport.redis", "Channel.pool", kind=property),
    Target("kombu.transport.redis", "Transport.Channel"),
)


class Channel(redis.Channel):
    _shared_client: Any = None

    @contextlib.contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        shared = self._shared_client
        # A new pool (kombu drops its pools when the connection is lost) needs a new client.
        if shared is None or shared.connection_pool is not self.pool:
            shared = self._shared_client = self._create_client()
        yield shared


class Transport(redis.Transport):
    Channel = Channel


check = check_for(
    check_id="chatsite.server.E002",
    library="kombu",
    patch="chatsite/server/patches/kombu.py",
    targets=TARGETS,
)
