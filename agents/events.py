"""The one module that talks to the channel layer (docs/architecture.md, "events").

Stored events reach a conversation's group only after the transaction that wrote them
commits (``publish_on_commit``), so a browser never sees a step that could still roll back.
The events of one append travel as one group message (``{"type": "chat.event", "frames":
[...]}``): a model reply's steps cost one channel-layer send, not one each. Ephemeral frames
(``thought.delta``, ``answer.delta``) carry no ``seq`` and go out at once; their text can be
kept in Redis on the way (``KeptText``), in order with the frame, without blocking the
caller: the model's streaming callbacks run on the model client's event loop
(``agents/llm/client.py``), which must never wait on a socket.

Sends are handed to the process's event loop (``chatsite/server/loop.py``), where a worker
also drives its runs: a caller (a database thread after its commit, a run, daphne) is never
blocked, and whatever is queued when Redis is next free goes out as one pipeline, in the
order it was submitted.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers
from django.conf import settings
from django.db import transaction

from agents.protocol import event_frame
from chatsite.server.loop import on_process_loop, process_loop
from chatsite.server.per_process import PerProcess
from chatsite.server.sockets.signouts import SIGNED_OUT_GROUP

if TYPE_CHECKING:
    from agents.models import RunEvent

logger = logging.getLogger(__name__)

GROUP_MESSAGE_TYPE = "chat.event"
SIGNED_OUT_MESSAGE_TYPE = "chat.signed_out"


def group_name(conversation_id: int) -> str:
    """The channel-layer group every socket open on this conversation joins."""
    return f"conversation.{conversation_id}"


def sign_in_name(session_key: str) -> str:
    """How a sign-out names the sign-in that ended: a hash of its session key, which itself
    never goes through Redis."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:40]


def publish_signed_out(session_key: str) -> None:
    """Tell the sockets of a sign-in that it ended (logout), once the transaction commits."""
    message = {"type": SIGNED_OUT_MESSAGE_TYPE, "sign_in": sign_in_name(session_key)}
    transaction.on_commit(lambda: _publisher().send_to_group(SIGNED_OUT_GROUP, message))


def publish_on_commit(stored: Sequence[RunEvent]) -> None:
    """Publish events of one conversation, in order, once the current transaction commits."""
    if not stored:
        return
    conversation_id = stored[0].conversation_id
    frames = [event_frame(event) for event in stored]
    transaction.on_commit(lambda: _publisher().send(conversation_id, frames))


def publish_committed(stored: Sequence[RunEvent]) -> None:
    """Publish events of one conversation, in order, that are already committed: written by
    a statement with its own commit, outside any transaction (the event loop's connections,
    ``chatsite/server/db/loop_pool.py``)."""
    if not stored:
        return
    _publisher().send(stored[0].conversation_id, [event_frame(event) for event in stored])


NOTIFICATION_MESSAGE_TYPE = "notification.event"


def notifications_group_name(user_id: int) -> str:
    """The group every notifications socket of the user joins (``/ws/notifications/``)."""
    return f"notifications.{user_id}"


def publish_notification_on_commit(user_id: int, frame: dict[str, Any]) -> None:
    """Send a notification frame to the user's open pages once the transaction commits."""
    message = {"type": NOTIFICATION_MESSAGE_TYPE, "frame": frame}
    group = notifications_group_name(user_id)
    transaction.on_commit(lambda: _publisher().send_to_group(group, message))


EVALUATION_MESSAGE_TYPE = "evaluation.event"


def evaluation_group_name(eval_run_id: int) -> str:
    """The group every socket following this evaluation joins (``/ws/evaluations/<id>/``)."""
    return f"evaluation.{eval_run_id}"


def publish_evaluation_on_commit(eval_run_id: int, frame: dict[str, Any]) -> None:
    """Send an evaluation's progress to the staff watching it once the transaction commits."""
    message = {"type": EVALUATION_MESSAGE_TYPE, "frame": frame}
    group = evaluation_group_name(eval_run_id)
    transaction.on_commit(lambda: _publisher().send_to_group(group, message))


# The channel layer's message type (``NotificationConsumer.notification_budget_warning``).
BUDGET_WARNING_MESSAGE_TYPE = "notification.budget_warning"


def publish_budget_warning_on_commit(user_ids: Sequence[int]) -> None:
    """Tell the users' open pages, once the transaction commits (at once outside one), that
    a monthly budget they are under passed its warning share or was used up. The message
    carries no text: each notifications socket words the notice in its own language
    (``NotificationConsumer.notification_budget_warning``), as the page would on a reload."""
    message = {"type": BUDGET_WARNING_MESSAGE_TYPE}
    groups = [notifications_group_name(user_id) for user_id in user_ids]

    def send() -> None:
        for group in groups:
            _publisher().send_to_group(group, message)

    if groups:
        transaction.on_commit(send)


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

    With ``keep``, its text is written to Redis first, in the same pipeline and in order with
    everything submitted before, so a socket that joins after the frame went out finds the
    text there. A write Redis refuses is logged and the frame still goes out.
    """
    _publisher().send(conversation_id, [frame], keep=keep)


def drop_kept(keys: Sequence[str], timeout: float = 5.0) -> bool:
    """Delete kept text, after every frame (and its kept text) already submitted, and wait
    until it is gone: a stored step that replaces the live text can then be written without
    a late ``KeptText`` bringing the old text back. False if Redis could not be reached in
    time (the keys then expire with their ``ttl_ms``)."""
    assert not on_process_loop(), "a coroutine on the process loop awaits adrop_kept"
    future = _publisher().submit(_Drop(list(keys)))
    try:
        return future is None or bool(future.result(timeout))
    except TimeoutError:
        return False


async def adrop_kept(keys: Sequence[str], timeout: float = 5.0) -> bool:
    """``drop_kept`` for a coroutine: the event loop it runs on goes on meanwhile."""
    future = _publisher().submit(_Drop(list(keys)))
    try:
        return future is None or bool(await asyncio.wait_for(asyncio.wrap_future(future), timeout))
    except TimeoutError:
        return False


def publish_flush(timeout: float = 5.0) -> bool:
    """Wait until every frame submitted so far has been handed to Redis.

    For a worker about to exit or a test about to assert; returns False on timeout.
    """
    assert not on_process_loop(), "the process loop cannot wait for itself"
    future = _publisher().submit(_Drop([]))
    try:
        if future is not None:
            future.result(timeout)
    except TimeoutError:
        return False
    return True


@dataclass
class _Publish:
    group: str
    payload: bytes
    keep: KeptText | None


@dataclass
class _Drop:
    """Delete ``keys`` (none: a barrier) once everything submitted before has been sent."""

    keys: list[str]
    done: Future = field(default_factory=Future)


class _Publisher:
    """This process's sends to Redis, on the process's loop (``chatsite/server/loop.py``).

    Everything submitted, from any thread, joins one queue; one task sends what has queued
    up as one pipeline on one connection, in the order it was submitted. So frames of one
    conversation stay in order, a busy process pays one round trip for many frames, and the
    client's connection pool (whose lock every concurrent command would wait on) is not
    contended. A frame is published as the channel layer would publish it: on the layer's
    group channel, with the layer's serializer, on its one Redis server (``REDIS_URL``,
    settings.CHANNEL_LAYERS); daphne's consumers receive it through the layer as usual.
    """

    # Commands in one pipeline at most: a backlog goes out in several round trips.
    BATCH = 1000

    def __init__(self) -> None:
        self.loop = process_loop()
        # Our own instance, not the process-wide one daphne's consumers receive on: used only
        # for its group channel names and serializer, never to send.
        self.layer = (
            channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
            if DEFAULT_CHANNEL_LAYER in channel_layers.configs
            else None
        )
        self._queue: collections.deque[_Publish | _Drop] = collections.deque()
        self._wake = asyncio.Event()
        self._redis: Any = None
        self._sender = asyncio.run_coroutine_threadsafe(self._send_forever(), self.loop)

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
        self.submit(_Publish(group, self.layer.serialize(message), keep))

    def submit(self, item: _Publish | _Drop) -> Future | None:
        """Queue ``item``; a ``_Drop``'s future is returned (None: no layer, nothing to do)."""
        if self.layer is None:
            return None
        # call_soon_threadsafe keeps submission order, which the queue relies on.
        self.loop.call_soon_threadsafe(self._enqueue, item)
        return item.done if isinstance(item, _Drop) else None

    def _enqueue(self, item: _Publish | _Drop) -> None:
        self._queue.append(item)
        self._wake.set()

    async def _send_forever(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch: list[_Publish | _Drop] = []
            while self._queue and len(batch) < self.BATCH:
                batch.append(self._queue.popleft())
            await self._send(batch)

    async def _send(self, batch: list[_Publish | _Drop]) -> None:
        assert self.layer is not None  # submit() queues nothing without a layer
        try:
            async with self._client().pipeline(transaction=False) as pipe:
                for item in batch:
                    if isinstance(item, _Drop):
                        if item.keys:
                            pipe.delete(*item.keys)
                        continue
                    if item.keep is not None:
                        keep = item.keep
                        if keep.replace:
                            pipe.set(keep.key, keep.value, px=keep.ttl_ms)
                        else:
                            pipe.append(keep.key, keep.value)
                            pipe.pexpire(keep.key, keep.ttl_ms)
                    # The layer names its group channels on the loop it runs on: this one.
                    pipe.publish(self.layer._get_group_channel_name(item.group), item.payload)
                results = await pipe.execute(raise_on_error=False) if len(pipe) else []
        except Exception:
            # A lost live frame is recoverable: the client replays stored events by seq.
            logger.exception("could not publish %d frames and drops", len(batch))
            results = None
        failed = [result for result in results or () if isinstance(result, Exception)]
        if failed:
            # Kept text is a courtesy to sockets that join later; the frames around it went out.
            logger.warning("Redis refused %d of a batch's commands: %s", len(failed), failed[0])
        for item in batch:
            if isinstance(item, _Drop) and not item.done.done():
                item.done.set_result(results is not None)

    def _client(self) -> Any:
        if self._redis is None:
            import redis.asyncio

            self._redis = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=2)
        return self._redis


# A forked child inherits the publisher but not the thread running its loop: it makes its own.
_publishers = PerProcess(_Publisher)


def _publisher() -> _Publisher:
    return _publishers.get()


# --- Listening (the API's server-sent events, agents/api/streams.py) ----------------------


class GroupListener:
    """What the channel layer delivers to a conversation's group, for one reader in this
    process (a socket's consumer gets the same from Channels). Join before reading the log,
    as a socket does; ``close`` when done."""

    def __init__(self, conversation_id: int) -> None:
        self.group = group_name(conversation_id)
        self.layer: Any = None
        self.channel = ""
        self._receiving: asyncio.Future[dict[str, Any]] | None = None

    async def join(self) -> None:
        from channels.layers import get_channel_layer

        self.layer = get_channel_layer()
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)

    async def next(self, timeout: float) -> dict[str, Any] | None:
        """The next group message, or None if none came within ``timeout`` seconds; a
        receive that timed out is kept for the next call (cancelling it would drop the
        channel, channels-redis's pub/sub layer)."""
        if self._receiving is None:
            self._receiving = asyncio.ensure_future(self.layer.receive(self.channel))
        done, _ = await asyncio.wait({self._receiving}, timeout=timeout)
        if not done:
            return None
        message, self._receiving = self._receiving.result(), None
        return message if message.get("type") == GROUP_MESSAGE_TYPE else {"frames": []}

    async def close(self) -> None:
        if self.layer is None:
            return
        if self._receiving is None:
            # The layer forgets a channel when a receive on it is cancelled: start one so.
            self._receiving = asyncio.ensure_future(self.layer.receive(self.channel))
            await asyncio.sleep(0)
        self._receiving.cancel()
        with contextlib.suppress(BaseException):
            await self._receiving
        await self.layer.group_discard(self.group, self.channel)
