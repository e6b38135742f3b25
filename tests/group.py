"""Listening to a conversation's group on the real channel layer, as a socket would."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import redis.asyncio as aioredis
from channels.layers import channel_layers
from django.conf import settings

from agents import events


async def subscribed_in_redis() -> set[str]:
    """The pub/sub channels of this test session's channel layer that Redis has a
    subscriber for (any process's)."""
    prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]
    client = aioredis.Redis.from_url(settings.REDIS_URL)
    try:
        return {name.decode() for name in await client.pubsub_channels(f"{prefix}*")}
    finally:
        await client.aclose()


class GroupListener:
    """A channel added to the conversation's group; ``received`` drains what reached it.

    The layer is Redis pub/sub: a subscription belongs to one event loop, so the listener
    keeps its own loop running in a thread, as daphne keeps one for its sockets.
    """

    def __init__(self, conversation_id: int) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="group-listener", daemon=True).start()
        self.layer = channel_layers.make_backend("default")
        self._pending: asyncio.Future | None = None
        self.channel = self._call(self.layer.new_channel())
        self._call(self.layer.group_add(events.group_name(conversation_id), self.channel))

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    def received(self) -> list[dict[str, Any]]:
        """Every message delivered so far (call ``events.publish_flush`` first)."""

        async def drain() -> list[dict[str, Any]]:
            # Waiting is never cancelled: a cancelled receive unsubscribes the channel.
            messages = []
            while True:
                if self._pending is None:
                    self._pending = asyncio.ensure_future(self.layer.receive(self.channel))
                done, _ = await asyncio.wait({self._pending}, timeout=0.5)
                if not done:
                    return messages
                messages.append(self._pending.result())
                self._pending = None

        return self._call(drain())

    def frames(self) -> list[dict[str, Any]]:
        """The frames of every message delivered so far, in order."""
        return [frame for message in self.received() for frame in message["frames"]]
