"""A run's stored frames as an async stream, for the API's server-sent events.

The same two sources as the socket (agents/consumers.py), in the same order: join the
conversation's group first, then read the log from the asked ``seq`` a page at a time
(``selectors.event_rows_after``, the socket's replay read), then take what the group
delivers, dropping the seqs already sent and re-reading the log across a gap. Nothing here
writes; the stream runs on daphne's event loop and holds no thread between frames (each read
of the log borrows a thread of a shared pool for its one query).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import Any, ParamSpec, TypeVar, cast

from channels.db import database_sync_to_async

from agents import events, selectors
from agents.protocol import TERMINAL_FRAME_TYPES, event_frame

P = ParamSpec("P")
R = TypeVar("R")

REPLAY_BATCH = 200
# A comment line this often keeps proxies from closing a quiet stream (a run that waits).
KEEPALIVE_SECONDS = 15.0


def _read_frames_after(conversation_id: int, after_seq: int) -> list[dict[str, Any]]:
    stored = selectors.event_rows_after(
        conversation_id=conversation_id, after_seq=after_seq, limit=REPLAY_BATCH
    )
    return [event_frame(event) for event in stored]


def in_shared_thread(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``func`` on a thread of asgiref's shared pool, not the request's own, with Django's
    stale-connection cleanup before and after (Channels' ``database_sync_to_async``)."""
    return cast(Callable[P, Awaitable[R]], database_sync_to_async(func, thread_sensitive=False))


_frames_after = in_shared_thread(_read_frames_after)


async def run_frames(
    *,
    conversation_id: int,
    run_id: int,
    after_seq: int,
    until: Collection[str] = TERMINAL_FRAME_TYPES,
    follow: bool = True,
) -> AsyncIterator[dict[str, Any] | None]:
    """The run's stored frames with ``seq > after_seq``, oldest first, ending after the first
    whose type is in ``until`` (by default the run's end), or, without ``follow``, after
    what is stored now. ``None`` is yielded when nothing came for ``KEEPALIVE_SECONDS``: the
    caller's cue to show it is still there."""
    listener = events.GroupListener(conversation_id)
    await listener.join()
    last_seq = after_seq
    try:

        async def stored_since_last() -> AsyncIterator[dict[str, Any]]:
            nonlocal last_seq
            while True:
                frames = await _frames_after(conversation_id, last_seq)
                for frame in frames:
                    last_seq = frame["seq"]
                    yield frame
                if len(frames) < REPLAY_BATCH:
                    return

        # Joined before this read: anything committed after it arrives through the group.
        async for frame in stored_since_last():
            if frame["run_id"] == run_id:
                yield frame
                if frame["type"] in until:
                    return
        while follow:
            message = await listener.next(KEEPALIVE_SECONDS)
            if message is None:
                yield None
                continue
            for live in message["frames"]:
                seq = live.get("seq")
                if seq is None or seq <= last_seq:
                    continue  # live text, or already sent
                # A gap: the layer lost or delayed a frame; the log has every one in order.
                if seq == last_seq + 1:
                    last_seq = seq
                    found = [live]
                else:
                    found = [frame async for frame in stored_since_last()]
                for frame in found:
                    if frame["run_id"] == run_id:
                        yield frame
                        if frame["type"] in until:
                            return
    finally:
        await listener.close()


def sse_event(
    data: dict[str, Any] | str, *, event: str | None = None, id: int | None = None
) -> str:
    """One server-sent event: optional ``id`` and ``event`` lines, then ``data``."""
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    lines.append(f"data: {text}")
    return "\n".join(lines) + "\n\n"


SSE_KEEPALIVE = ": keep-alive\n\n"
