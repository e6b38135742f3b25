"""The text a run is writing right now: its current thought and its answer, live.

The log stores a thought when the model's reply has ended and the answer when the run does;
until then the words exist only as they stream from the model. This module sends them to the
conversation's sockets as ephemeral ``thought.delta`` / ``answer.delta`` frames and keeps the
text sent so far in Redis, so that a socket joining mid-reply (the page a new chat redirects
to, a reload, a second tab) first gets everything streamed so far and then the rest, exactly
once (docs/protocol.md, "Live text").

- **Offsets.** Each frame says where its text starts (``offset``, in UTF-16 code units, what
  a browser's ``String.length`` counts) within one ``segment``: a thought or an answer of one
  attempt of a run. A client appends what lies past the text it has and ignores the rest.
- **Coalescing.** Tokens arrive a few characters at a time; a frame per token costs more in
  the channel layer and daphne than the text is worth. Text is gathered for
  ``FLUSH_SECONDS`` or ``FLUSH_CHARS``, whichever comes first, on a timer of the event loop
  that drives the run: the first words of a reply appear at most 50 ms after the model
  writes them, and a reply that is written, parsed and replaced by its stored step within
  that time (a fast model, or one that sends its reply in one burst) costs no live frame
  at all: the step carries the text. Called outside an event loop (a thread driving the
  engine itself), the first delta after a quiet spell goes out at once and the rest is
  gathered by a flusher thread.
- **Storage.** One Redis string per conversation and part (one run at a time per
  conversation): a ``run_id:segment:`` header, then the text, grown with ``APPEND``. Never
  PostgreSQL: the log is the stored steps. ``LiveText.settle`` deletes it just *before* the
  step or ending that supersedes it is written, so a joining socket can miss the text for
  the moment the write takes (the stored frame follows) but never gets it twice.

The worker side is ``LiveText`` (one per run attempt); the socket side is ``live_frames``.
Publishing goes through ``agents/events.py`` like every other frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Literal

import redis
import redis.asyncio
from django.conf import settings

from agents import events
from agents.protocol import FrameType
from agents.react.types import ModelCallRecord, Step, ThoughtDelta, ThoughtStep

logger = logging.getLogger(__name__)

Part = Literal["thought", "answer"]
PARTS: tuple[Part, ...] = ("thought", "answer")
FRAME_TYPES: dict[Part, str] = {
    "thought": FrameType.THOUGHT_DELTA,
    "answer": FrameType.ANSWER_DELTA,
}

_HEADER = re.compile(r"(\d+):(\d+\.\d+):(.*)", re.DOTALL)

FLUSH_SECONDS = 0.05
FLUSH_CHARS = 400
# Long enough for any run; only a crashed worker's text is left to expire.
KEY_TTL_MS = 3_600_000


def key(conversation_id: int, part: Part) -> str:
    # Under the channel layer's prefix, as the frames it goes out with: two sites (or two
    # test sessions) on one Redis would otherwise append to each other's conversation of the
    # same id, and a page joining mid-reply would read both.
    layer: dict[str, Any] = settings.CHANNEL_LAYERS["default"]
    return f"{layer['CONFIG']['prefix']}:live:{conversation_id}:{part}"


def utf16_length(text: str) -> int:
    """How long ``text`` is in a browser: astral characters count twice there."""
    return len(text.encode("utf-16-le")) // 2


def delta_frame(*, part: Part, run_id: int, segment: str, offset: int, text: str) -> dict:
    return {
        "type": FRAME_TYPES[part],
        "run_id": run_id,
        "segment": segment,
        "offset": offset,
        "text": text,
    }


# --------------------------------------------------------------------------------------
# The worker side
# --------------------------------------------------------------------------------------


class LiveText:
    """The live thought and answer of one attempt of one run, in the worker driving it.

    ``thought_delta``, ``answer_delta`` and ``answer_reset`` are the engine's streaming
    callbacks (``AgentExecutor``); ``track`` follows the steps the worker stores, so that
    the live text is dropped just before the step that replaces it is written. A thought's
    segment is its model call (``ThoughtDelta.call_index``). Thread-safe: the flusher
    thread and the run's thread both flush.
    """

    def __init__(self, *, conversation_id: int, run_id: int, attempt: int) -> None:
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.attempt = attempt
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        # Per part: the segment id, the UTF-16 length already sent, the text held back.
        self._segment: dict[Part, str | None] = {"thought": None, "answer": None}
        self._sent: dict[Part, int] = {"thought": 0, "answer": 0}
        self._held: dict[Part, list[str]] = {"thought": [], "answer": []}
        self._held_chars = 0
        self._held_part: Part | None = None
        self._thought_call: int | None = None
        self._last_flush = -FLUSH_SECONDS
        self._stored_any = False
        self._timer: asyncio.TimerHandle | None = None

    # -- the engine's callbacks ---------------------------------------------------------
    def thought_delta(self, delta: ThoughtDelta) -> None:
        if delta.call_index != self._thought_call:
            with self._lock:
                self._flush_locked()
                self._segment["thought"] = None  # another model call: a new thought
                self._sent["thought"] = 0
                self._thought_call = delta.call_index
        self._add("thought", delta.text)
        if delta.done and _running_loop() is None:
            # The reply has ended: its steps come next. On a loop the timer sends the text
            # if they take longer than FLUSH_SECONDS; mostly they carry it first.
            self.flush()

    def answer_delta(self, text: str) -> None:
        self._add("answer", text)

    def answer_reset(self) -> None:
        """What streamed as the answer was a thought (native mode: tool calls followed).

        Clients get an empty answer of a new segment, which replaces the text they show.
        """
        with self._lock:
            self._flush_locked()
            if self._segment["answer"] is None:
                return
            self._held["answer"].append("")
            self._held_part = "answer"
            self._segment["answer"] = None
            self._sent["answer"] = 0
            self._flush_locked()

    # -- the worker's ----------------------------------------------------------------------
    async def track(self, steps: AsyncGenerator[Step, None]) -> AsyncIterator[Step]:
        """The engine's steps, passed through; the live text follows what they mean.

        Any step but a model call's record or a thought is about to be stored with what came
        before it (the worker holds those two back until the step parsed after them), and
        so is the run's ending after an exception or an early return: the live text is
        dropped first. ``steps`` is closed with this iterator.
        """
        try:
            async with contextlib.aclosing(steps):
                async for step in steps:
                    if not isinstance(step, ModelCallRecord | ThoughtStep):
                        await self.asettle()
                    yield step
        finally:
            await self.asettle()

    def settle(self) -> None:
        """Drop the live text before the step or ending that replaces it is stored."""
        if self._forget_text():
            events.drop_kept(self._keys())

    async def asettle(self) -> None:
        """``settle`` for a coroutine: the event loop it runs on goes on while Redis works."""
        if self._forget_text():
            await events.adrop_kept(self._keys())

    def _forget_text(self) -> bool:
        """Forget what this run streamed; whether any of it was kept in Redis (to drop there,
        after every delta already submitted, so no late write brings the text back)."""
        with self._lock:
            for part in PARTS:
                self._held[part].clear()
                self._segment[part] = None
                self._sent[part] = 0
            self._held_chars = 0
            self._held_part = None
            self._thought_call = None
            stored_any, self._stored_any = self._stored_any, False
        _flusher.forget(self)
        return stored_any

    def _keys(self) -> list[str]:
        return [key(self.conversation_id, part) for part in PARTS]

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    # -- internals -------------------------------------------------------------------------
    def _add(self, part: Part, text: str) -> None:
        if not text:
            return
        with self._lock:
            if self._held_part is not None and self._held_part != part:
                self._flush_locked()  # keep the parts' frames in the order they were written
            self._held[part].append(text)
            self._held_part = part
            self._held_chars += len(text)
            if self._held_chars >= FLUSH_CHARS:
                self._flush_locked()
                return
            loop = _running_loop()
            if loop is not None:
                # A timer left from text since dropped (settle) sends this text sooner,
                # which is still within the bound.
                if self._timer is None:
                    self._timer = loop.call_later(FLUSH_SECONDS, self._flush_on_timer)
                return
            if time.monotonic() - self._last_flush >= FLUSH_SECONDS:
                self._flush_locked()
                return
        _flusher.schedule(self, self._last_flush + FLUSH_SECONDS)

    def _flush_on_timer(self) -> None:
        with self._lock:
            self._timer = None
            self._flush_locked()

    def _flush_locked(self) -> None:
        part = self._held_part
        if part is None:
            return
        text = "".join(self._held[part])
        self._held[part].clear()
        self._held_chars = 0
        self._held_part = None
        self._last_flush = time.monotonic()
        current = self._segment[part]
        new_segment = current is None
        segment = f"{self.attempt}.{next(self._numbers)}" if current is None else current
        self._segment[part] = segment
        offset = self._sent[part]
        self._sent[part] = offset + utf16_length(text)
        name = key(self.conversation_id, part)

        # Kept in Redis before it is published, in the same pipeline and in order with the
        # conversation's other frames: a socket that joins after the frame went out finds the
        # text there (live_frames), one that joins before gets the frame. The engine calls
        # this on the process's loop, which must not wait on Redis.
        kept = events.KeptText(
            key=name,
            value=f"{self.run_id}:{segment}:{text}" if new_segment else text,
            replace=new_segment,
            ttl_ms=KEY_TTL_MS,
        )
        frame = delta_frame(
            part=part, run_id=self.run_id, segment=segment, offset=offset, text=text
        )
        events.publish_ephemeral(self.conversation_id, frame, keep=kept)
        self._stored_any = True


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Flusher:
    """One thread per process that sends held-back text when its time is up, for engines
    driven outside an event loop."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._due: list[tuple[float, int, LiveText]] = []
        self._scheduled: dict[int, float] = {}
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def schedule(self, live: LiveText, when: float) -> None:
        with self._lock:
            if id(live) in self._scheduled:
                return
            self._scheduled[id(live)] = when
            # The thread sleeps until the earliest time due: it needs waking only when this
            # one comes sooner. Waking it for every delta costs the process loop a thread
            # switch per held-back delta under load.
            sooner = not self._due or when < self._due[0][0]
            heapq.heappush(self._due, (when, next(self._order), live))
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._loop, name="chatsite-live-flush", daemon=True
                )
                self._thread.start()
            elif sooner:
                self._lock.notify()

    def forget(self, live: LiveText) -> None:
        with self._lock:
            self._scheduled.pop(id(live), None)

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._due:
                    self._lock.wait()
                when, _, live = self._due[0]
                wait = when - time.monotonic()
                if wait > 0:
                    self._lock.wait(wait)
                    continue
                heapq.heappop(self._due)
                if self._scheduled.get(id(live)) != when:
                    continue  # settled meanwhile
                del self._scheduled[id(live)]
            try:
                live.flush()
            except Exception:
                logger.exception("could not send live text of run %s", live.run_id)


_flusher = _Flusher()

# --------------------------------------------------------------------------------------
# The socket side
# --------------------------------------------------------------------------------------

_async_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _async_client() -> redis.asyncio.Redis:
    # A client's connections belong to the loop that opened them.
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=2)
        _async_clients[loop] = client
    return client


async def live_frames(conversation_id: int) -> list[dict[str, Any]]:
    """The live text of the conversation's run in progress, as one delta frame per part
    (offset 0, everything so far); empty when nothing is being written."""
    try:
        values = await _async_client().mget([key(conversation_id, part) for part in PARTS])
    except redis.RedisError:
        logger.warning("could not read the live text from Redis", exc_info=True)
        return []
    frames = []
    for part, value in zip(PARTS, values, strict=True):
        # No header: the key was deleted while a worker appended to it (a run taken over);
        # its text is not whole, so it is not sent.
        found = _HEADER.match(value.decode("utf-8", errors="replace")) if value else None
        if found is None or not found.group(3):
            continue
        run_id, segment, text = found.groups()
        frames.append(
            delta_frame(part=part, run_id=int(run_id), segment=segment, offset=0, text=text)
        )
    return frames
