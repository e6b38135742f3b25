"""The one module that talks to the channel layer (docs/architecture.md, "events").

Stored events reach a conversation's group only after the transaction that wrote them
commits (``publish_on_commit``), so a browser never sees a step that could still roll back.
The events of one append travel as one group message (``{"type": "chat.event", "frames":
[...]}``): a model reply's steps cost one channel-layer send, not one each. Ephemeral frames
(``thought.delta``, ``answer.delta``) carry no ``seq`` and go out at once; their text can be
kept in Redis on the way (``KeptText``), in order with the frame, without blocking the
caller: the model's streaming callbacks run on the model client's event loop
(``agents/llm/client.py``), which must never wait on a socket.

Sends are handed to one long-lived asyncio loop per process, running in a daemon thread with
one channel layer: a worker thread holding a run does not build an event loop and a Redis
pool for every frame, and a caller already inside an event loop (daphne) is never blocked.
Frames for one conversation leave in the order they were submitted.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers
from django.conf import settings
from django.db import transaction

from agents.protocol import event_frame

if TYPE_CHECKING:
    from agents.models import RunEvent

logger = logging.getLogger(__name__)

GROUP_MESSAGE_TYPE = "chat.event"
SIGNED_OUT_MESSAGE_TYPE = "chat.signed_out"


def group_name(conversation_id: int) -> str:
    """The channel-layer group every socket open on this conversation joins."""
    return f"conversation.{conversation_id}"


def session_group_name(session_key: str) -> str:
    """The group every socket opened with this sign-in joins (named by a hash of the key)."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def publish_signed_out(session_key: str) -> None:
    """Tell the sockets of a sign-in that it ended (logout), once the transaction commits."""
    message = {"type": SIGNED_OUT_MESSAGE_TYPE}
    group = session_group_name(session_key)
    transaction.on_commit(lambda: _publisher().send_to_group(group, message))


def publish_on_commit(stored: Sequence[RunEvent]) -> None:
    """Publish events of one conversation, in order, once the current transaction commits."""
    if not stored:
        return
    conversation_id = stored[0].conversation_id
    frames = [event_frame(event) for event in stored]
    transaction.on_commit(lambda: _publisher().send(conversation_id, frames))


@dataclass(frozen=True)
class KeptText:
    """Text to keep in Redis before an ephemeral frame goes out: ``value`` replaces the key
    (``replace``) or is appended to it, and the key expires ``ttl_ms`` after the last write."""

    key: str
    value: str
    replace: bool
    ttl_ms: int


def publish_ephemeral(
    conversation_id: int, frame: dict[str, Any], *, keep: KeptText | None = None
) -> None:
    """Publish a frame that is not stored (no ``seq``), at once and without blocking.

    With ``keep``, its text is written to Redis first, on the publishing loop and in order
    with this conversation's other frames, so a socket that joins after the frame went out
    finds the text there. A Redis failure is logged and the frame still goes out.
    """
    _publisher().send(conversation_id, [frame], keep=keep)


def drop_kept(conversation_id: int, keys: Sequence[str], timeout: float = 5.0) -> bool:
    """Delete kept text, after every frame (and its kept text) already submitted for the
    conversation, and wait until it is gone: a stored step that replaces the live text can
    then be written without a late ``KeptText`` bringing the old text back. False if Redis
    could not be reached in time (the keys then expire with their ``ttl_ms``)."""
    future = _drop_after_tail(conversation_id, keys)
    try:
        return future is None or bool(future.result(timeout))
    except TimeoutError:
        return False


async def adrop_kept(conversation_id: int, keys: Sequence[str], timeout: float = 5.0) -> bool:
    """``drop_kept`` for a coroutine: the event loop it runs on goes on meanwhile."""
    future = _drop_after_tail(conversation_id, keys)
    try:
        return future is None or bool(await asyncio.wait_for(asyncio.wrap_future(future), timeout))
    except TimeoutError:
        return False


def _drop_after_tail(conversation_id: int, keys: Sequence[str]) -> Future | None:
    publisher = _publisher()
    if publisher.layer is None:
        return None
    return asyncio.run_coroutine_threadsafe(
        publisher.drop_after_tail(group_name(conversation_id), list(keys)), publisher.loop
    )


def publish_flush(timeout: float = 5.0) -> bool:
    """Wait until every frame submitted so far has been handed to the layer.

    For a worker about to exit or a test about to assert; returns False on timeout.
    """
    return _publisher().flush(timeout)


class _Publisher:
    """An event loop in a daemon thread that owns this process's channel-layer sends."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        # Our own instance, not the process-wide one daphne's consumers receive on: a layer
        # keeps per-loop receive state that should not be shared with this loop.
        self.layer = (
            channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
            if DEFAULT_CHANNEL_LAYER in channel_layers.configs
            else None
        )
        # The last send per group: the next one for that group waits for it, so frames stay
        # in order per conversation while different conversations go out concurrently.
        self._tails: dict[str, asyncio.Future] = {}
        self._redis: Any = None
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="chatsite-events", daemon=True
        )
        self._thread.start()

    def send(
        self, conversation_id: int, frames: list[dict[str, Any]], keep: KeptText | None = None
    ) -> None:
        message = {"type": GROUP_MESSAGE_TYPE, "frames": frames}
        self.send_to_group(group_name(conversation_id), message, keep)

    def send_to_group(
        self, group: str, message: dict[str, Any], keep: KeptText | None = None
    ) -> None:
        if self.layer is None:
            return
        # call_soon_threadsafe keeps submission order, which the per-group chain relies on.
        self.loop.call_soon_threadsafe(self._enqueue, group, message, keep)

    def _enqueue(self, group: str, message: dict[str, Any], keep: KeptText | None) -> None:
        previous = self._tails.get(group)
        task = self.loop.create_task(self._send_after(previous, group, message, keep))
        self._tails[group] = task
        task.add_done_callback(lambda done: self._forget(group, done))

    def _forget(self, group: str, task: asyncio.Future) -> None:
        if self._tails.get(group) is task:
            del self._tails[group]

    async def _send_after(
        self,
        previous: asyncio.Future | None,
        group: str,
        message: dict[str, Any],
        keep: KeptText | None,
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        assert self.layer is not None  # send() submits nothing without a layer
        try:
            if keep is None or not await self._keep_and_publish(keep, group, message):
                await self.layer.group_send(group, message)
        except Exception:
            # A lost live frame is recoverable: the client replays stored events by seq.
            logger.exception("could not publish to %s", group)

    async def _keep_and_publish(self, keep: KeptText, group: str, message: dict[str, Any]) -> bool:
        """Keep the text and publish the frame in one round trip to Redis; False if the frame
        did not go out (it is then sent through the layer).

        The frame is published as the layer would publish it (its group channel and its
        serializer) on the layer's one Redis server, ``REDIS_URL`` (settings.CHANNEL_LAYERS):
        a live delta costs one round trip instead of two.
        """
        assert self.layer is not None
        channel = self.layer._get_group_channel_name(group)
        try:
            async with self._client().pipeline(transaction=False) as pipe:
                if keep.replace:
                    pipe.set(keep.key, keep.value, px=keep.ttl_ms)
                else:
                    pipe.append(keep.key, keep.value)
                    pipe.pexpire(keep.key, keep.ttl_ms)
                pipe.publish(channel, self.layer.serialize(message))
                results = await pipe.execute(raise_on_error=False)
        except Exception:
            logger.warning("could not keep text in Redis under %s", keep.key, exc_info=True)
            return False
        if any(isinstance(result, Exception) for result in results[:-1]):
            # Kept text is a courtesy to sockets that join later; the frame still went out.
            logger.warning("could not keep text in Redis under %s: %s", keep.key, results)
        return not isinstance(results[-1], Exception)

    async def drop_after_tail(self, group: str, keys: list[str]) -> bool:
        previous = self._tails.get(group)
        if previous is not None:
            await asyncio.wait([previous])
        try:
            await self._client().delete(*keys)
        except Exception:
            logger.warning("could not drop kept text %s", keys, exc_info=True)
            return False
        return True

    def _client(self) -> Any:
        if self._redis is None:
            import redis.asyncio

            self._redis = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=2)
        return self._redis

    def flush(self, timeout: float) -> bool:
        future: Future = asyncio.run_coroutine_threadsafe(self._drain(), self.loop)
        try:
            future.result(timeout)
        except TimeoutError:
            return False
        return True

    async def _drain(self) -> None:
        while self._tails:
            await asyncio.wait(list(self._tails.values()))


_lock = threading.Lock()
_instance: _Publisher | None = None
_instance_pid: int | None = None


def _publisher() -> _Publisher:
    global _instance, _instance_pid
    # A forked child inherits the object but not the thread running its loop.
    if _instance is None or _instance_pid != os.getpid():
        with _lock:
            if _instance is None or _instance_pid != os.getpid():
                _instance = _Publisher()
                _instance_pid = os.getpid()
    return _instance
