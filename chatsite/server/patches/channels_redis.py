"""channels-redis's pub/sub layer, with each consumer's own channel kept inside its process.

Channels gives every consumer a channel of its own (``new_channel``), and channels-redis's
``RedisPubSubChannelLayer`` subscribes to it in Redis so that any process could send to it,
then unsubscribes when the consumer ends: two Redis round trips per socket, each through the
shard's lock (docs/performance.md#one-subscription). This project sends to
groups only (a conversation's, ``signed-out``); a consumer's own channel only ever receives
what a group delivers to it inside the process, or what this process puts on it
(``chatsite/server/sockets/signouts.py``). So here ``new_channel`` makes the local
queue without a subscription, and ``send`` to a channel of this process puts the message on
its queue directly. A ``send`` to a channel of another process is published as before, but
no process subscribes to such channels any more: use a group to reach another process.

The subclasses lean on the parent's private state (``_layers``, ``_args``, ``_kwargs``, the
loop layer's ``channels``) and on ``_wrap_close``: ``check`` (``chatsite.server.E003``) fails
at start-up if channels-redis changes them.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer
from channels_redis.utils import _wrap_close

from chatsite.server.patches.targets import Target, check_for

TARGETS = (
    Target("channels_redis.pubsub", "RedisPubSubChannelLayer._get_layer", parameters=("self",)),
    Target(
        "channels_redis.pubsub",
        "RedisPubSubChannelLayer.__init__",
        # Where the layers, arguments and serializer this module reads are set.
        source_contains=("self._args = args", "self._kwargs = kwargs", "self._layers = {}"),
    ),
    Target(
        "channels_redis.pubsub",
        "RedisPubSubLoopLayer.__init__",
        parameters=(
            "self",
            "hosts",
            "prefix",
            "on_disconnect",
            "on_reconnect",
            "channel_layer",
            "kwargs",
        ),
        source_contains=("self.channels = {}",),
    ),
    Target(
        "channels_redis.pubsub", "RedisPubSubLoopLayer.new_channel", parameters=("self", "prefix")
    ),
    Target(
        "channels_redis.pubsub",
        "RedisPubSubLoopLayer.send",
        parameters=("self", "channel", "message"),
    ),
    Target(
        "channels_redis.pubsub", "RedisPubSubChannelLayer.serialize", parameters=("self", "message")
    ),
    Target("channels_redis.utils", "_wrap_close", parameters=("proxy", "loop")),
)


class _LocalChannelsLoopLayer(RedisPubSubLoopLayer):
    async def new_channel(self, prefix: str = "specific.") -> str:
        channel = f"{self.prefix}{prefix}{uuid.uuid4().hex}"
        self.channels[channel] = asyncio.Queue()
        return channel

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        if not self.deliver_here(channel, message):
            await super().send(channel, message)

    def deliver_here(self, channel: str, message: dict[str, Any]) -> bool:
        """Put ``message`` on ``channel``'s queue if the channel is this process's; never
        publishes. False if it is not (a consumer that has ended, or another process's)."""
        queue = self.channels.get(channel)
        if queue is None:
            return False
        # Serialised as a message from Redis would be, so receive() treats both alike.
        queue.put_nowait(self.channel_layer.serialize(message))
        return True


class LocalChannelsPubSubLayer(RedisPubSubChannelLayer):
    """``RedisPubSubChannelLayer`` whose specific channels are not subscribed in Redis."""

    def _get_layer(self) -> RedisPubSubLoopLayer:
        # One layer per event loop, as the parent keeps them; only the class differs.
        loop = asyncio.get_running_loop()
        layer = self._layers.get(loop)
        if layer is None:
            layer = _LocalChannelsLoopLayer(*self._args, **self._kwargs, channel_layer=self)
            self._layers[loop] = layer
            _wrap_close(self, loop)
        return layer


check = check_for(
    check_id="chatsite.server.E003",
    library="channels-redis",
    patch="chatsite/server/patches/channels_redis.py",
    targets=TARGETS,
)
