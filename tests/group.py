"""Listening to a conversation's group on the real channel layer, as a socket would."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import channel_layers

from agents import events


class GroupListener:
    """A channel added to the conversation's group; ``received`` drains what reached it."""

    def __init__(self, conversation_id: int) -> None:
        self.layer = channel_layers.make_backend("default")
        self.channel = async_to_sync(self.layer.new_channel)()
        async_to_sync(self.layer.group_add)(events.group_name(conversation_id), self.channel)

    def received(self) -> list[dict[str, Any]]:
        """Every message delivered so far (call ``events.publish_flush`` first)."""

        async def drain() -> list[dict[str, Any]]:
            messages = []
            while True:
                try:
                    messages.append(await asyncio.wait_for(self.layer.receive(self.channel), 0.5))
                except TimeoutError:
                    return messages

        return async_to_sync(drain)()

    def frames(self) -> list[dict[str, Any]]:
        """The frames of every message delivered so far, in order."""
        return [frame for message in self.received() for frame in message["frames"]]
