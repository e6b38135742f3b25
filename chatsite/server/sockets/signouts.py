"""A sign-out reaches this process's sockets through one subscription, not one per socket.

A logout closes the sockets its sign-in opened (``ConversationConsumer.chat_signed_out``).
Each socket used to join a group named after its sign-in: a Redis SUBSCRIBE as it opened and
an UNSUBSCRIBE as it closed, for a message that almost never comes. Here each event loop
that serves sockets joins one group, ``signed-out``, once, and keeps a map from a sign-in
to the channels of its sockets in this process; a sign-out (published by the domain, which
names the message's type) goes to that group with the sign-in's name, and the listener passes
the message as it came to those channels, so each socket still handles it in turn with its
other messages. Passing it on is a hand-off inside the process
(``chatsite/server/patches/channels_redis.py``, ``deliver_here``): nothing here publishes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger(__name__)

# The group every process serving sockets joins once; a sign-out is published to it.
SIGNED_OUT_GROUP = "signed-out"


class _Listener:
    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.channels_by_sign_in: dict[str, set[str]] = {}
        self.joined = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def join(self) -> None:
        """Return once the listener is subscribed; raise what kept it from subscribing."""
        if self.task is None or self.task.done():
            self.joined.clear()
            self.task = asyncio.ensure_future(self._listen())
        if self.joined.is_set():
            return
        joined = asyncio.ensure_future(self.joined.wait())
        await asyncio.wait({joined, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not self.joined.is_set():
            joined.cancel()
            self.task.result()  # the error that ended it (Redis out of reach, say)

    async def _listen(self) -> None:
        channel = await self.layer.new_channel()
        await self.layer.group_add(SIGNED_OUT_GROUP, channel)
        self.joined.set()
        while True:
            message = await self.layer.receive(channel)
            # .get: a notice without a name (another version's) must not end the listener.
            sign_in = message.get("sign_in")
            for socket_channel in tuple(self.channels_by_sign_in.get(sign_in, ())):
                try:
                    self.layer.deliver_here(socket_channel, message)
                except Exception:  # one socket's failure must not end the listener
                    logger.exception("passing a sign-out to a socket failed")


# One per event loop serving sockets: daphne has one; tests open sockets on many, each
# closed when its test ends (its listener's task cancelled with it).
_listeners: dict[asyncio.AbstractEventLoop, _Listener] = {}


async def watch(layer: Any, *, sign_in: str, channel: str) -> None:
    """Pass a sign-out of ``sign_in`` (as the publisher names it) to ``channel`` from now on;
    returns once this loop's listener is subscribed."""
    loop = asyncio.get_running_loop()
    for closed in [other for other in _listeners if other.is_closed()]:
        del _listeners[closed]
    listener = _listeners.get(loop)
    if listener is None or listener.layer is not layer:
        listener = _listeners[loop] = _Listener(layer)
    listener.channels_by_sign_in.setdefault(sign_in, set()).add(channel)
    await listener.join()


def forget(*, sign_in: str, channel: str) -> None:
    """Stop passing sign-outs of ``sign_in`` to ``channel`` (the socket closed)."""
    try:
        listener = _listeners[asyncio.get_running_loop()]
    except (KeyError, RuntimeError):
        return
    channels = listener.channels_by_sign_in.get(sign_in)
    if channels is not None:
        channels.discard(channel)
        if not channels:
            del listener.channels_by_sign_in[sign_in]
