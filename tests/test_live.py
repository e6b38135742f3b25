"""The live text of a run (agents/live.py): coalesced frames with offsets, kept in Redis until
the step that replaces it is stored."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import override_settings

from agents import events, live
from agents.react.types import (
    ActionStep,
    FinalAnswerStep,
    ModelCallRecord,
    ThoughtDelta,
    ThoughtStep,
)


@pytest.fixture
def published(monkeypatch):
    """The frames agents/live.py hands to agents/events.py, in order."""
    frames: list[dict] = []
    sent = threading.Event()
    publish_for_real = events.publish_ephemeral

    def publish(conversation_id, frame, *, keep=None):
        publish_for_real(conversation_id, frame, keep=keep)  # keeps the text in Redis
        frames.append({**frame, "conversation_id": conversation_id})
        sent.set()

    monkeypatch.setattr(events, "publish_ephemeral", publish)
    frames_sent = sent
    return frames, frames_sent


@pytest.fixture
def redis_client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def conversation_id(redis_client):
    # Ids far from any test database's: the suite's own runs write live text too.
    number = 10**9 + uuid.uuid4().int % 10**8
    yield number
    redis_client.delete(*(live.key(number, part) for part in live.PARTS))


def thought(text: str, *, call: int = 0, done: bool = False) -> ThoughtDelta:
    return ThoughtDelta(call_index=call, offset=0, text=text, done=done)


def snapshot(conversation_id: int) -> list[dict]:
    assert events.publish_flush()  # the kept text is written on the publishing loop
    return async_to_sync(live.live_frames)(conversation_id)


async def asnapshot(conversation_id: int) -> list[dict]:
    """``snapshot`` inside a coroutine (a test's stand-in engine or worker)."""
    assert events.publish_flush()
    return await live.live_frames(conversation_id)


def spliced(frames: list[dict]) -> str:
    """What a client that splices by offset ends up with (one segment)."""
    text = ""
    for frame in frames:
        assert frame["offset"] <= len(text.encode("utf-16-le")) // 2, "a gap"
        have = len(text.encode("utf-16-le")) // 2 - frame["offset"]
        units = frame["text"].encode("utf-16-le")
        text += units[have * 2 :].decode("utf-16-le")
    return text


def test_the_first_words_go_out_at_once_and_the_rest_is_gathered(
    published, conversation_id, monkeypatch
):
    frames, _ = published
    monkeypatch.setattr(live, "FLUSH_SECONDS", 600.0)  # a slow machine must not flush early
    text = live.LiveText(conversation_id=conversation_id, run_id=7, attempt=1)
    text.thought_delta(thought("I should "))
    assert frames == [
        {
            "type": "thought.delta",
            "run_id": 7,
            "segment": "1.1",
            "offset": 0,
            "text": "I should ",
            "conversation_id": conversation_id,
        }
    ]
    for word in ["add ", "the ", "numbers."]:
        text.thought_delta(thought(word))
    assert len(frames) == 1  # held back for at most FLUSH_SECONDS
    text.flush()
    assert frames[1]["offset"] == len("I should ")
    assert frames[1]["text"] == "add the numbers."
    assert spliced(frames) == "I should add the numbers."
    # Redis has everything sent so far, as a snapshot frame at offset 0.
    assert snapshot(conversation_id) == [
        {
            "type": "thought.delta",
            "run_id": 7,
            "segment": "1.1",
            "offset": 0,
            "text": "I should add the numbers.",
        }
    ]


def test_held_text_leaves_within_the_flush_interval_without_another_delta(
    published, conversation_id
):
    frames, sent = published
    text = live.LiveText(conversation_id=conversation_id, run_id=7, attempt=1)
    text.answer_delta("The sum ")
    sent.clear()
    text.answer_delta("is 4.")
    # The flusher thread sends it; a ceiling on the wait, not a measurement.
    assert sent.wait(5)
    assert [frame["text"] for frame in frames] == ["The sum ", "is 4."]
    assert frames[1]["offset"] == len("The sum ")


def test_a_long_burst_is_sent_in_pieces_of_bounded_size(published, conversation_id, monkeypatch):
    frames, _ = published
    monkeypatch.setattr(live, "FLUSH_SECONDS", 600.0)
    text = live.LiveText(conversation_id=conversation_id, run_id=7, attempt=1)
    for _ in range(300):
        text.answer_delta("word ")
    text.flush()
    assert all(len(frame["text"]) <= live.FLUSH_CHARS + len("word ") for frame in frames)
    assert len(frames) == 1 + len("word " * 299) // live.FLUSH_CHARS + 1
    assert spliced(frames) == "word " * 300


def test_offsets_count_what_a_browser_counts(published, conversation_id):
    frames, _ = published
    text = live.LiveText(conversation_id=conversation_id, run_id=7, attempt=1)
    text.answer_delta("🙂 ok")
    text.answer_delta("!")
    text.flush()
    assert frames[1]["offset"] == 5  # the emoji is two UTF-16 code units
    assert snapshot(conversation_id)[0]["text"] == "🙂 ok!"


def test_steps_end_thought_segments_and_drop_the_text_before_it_is_stored(
    published, conversation_id
):
    frames, sent = published
    text = live.LiveText(conversation_id=conversation_id, run_id=7, attempt=2)
    record = ModelCallRecord(index=0, messages=[], options={}, response_text="")

    async def flush_interval_passes():
        """The loop's timer sends what is held; a ceiling on the wait, not a measurement."""
        assert await asyncio.to_thread(sent.wait, 5)
        sent.clear()

    async def engine():
        text.thought_delta(thought("Let me look.", done=True))
        await flush_interval_passes()
        yield record
        yield ThoughtStep(text="Let me look.")
        assert await asnapshot(conversation_id) != []  # the thought is not stored yet
        yield ActionStep(tool="calculator", tool_input="2+2", call_id="call-1")
        text.thought_delta(thought("It is 4.", call=1))
        await flush_interval_passes()
        text.answer_delta("4")
        text.thought_delta(thought("", call=1, done=True))  # the reply ended
        await flush_interval_passes()
        yield record
        yield FinalAnswerStep(text="4")

    seen = []

    async def drive():
        async for step in text.track(engine()):
            seen.append(type(step).__name__)
            if isinstance(step, ActionStep | FinalAnswerStep):
                # The worker is about to store it: nobody joining now gets the text again.
                assert await asnapshot(conversation_id) == []

    asyncio.run(drive())
    assert seen == [
        "ModelCallRecord",
        "ThoughtStep",
        "ActionStep",
        "ModelCallRecord",
        "FinalAnswerStep",
    ]
    thoughts = [frame for frame in frames if frame["type"] == "thought.delta"]
    assert [(f["segment"], f["offset"], f["text"]) for f in thoughts] == [
        ("2.1", 0, "Let me look."),
        ("2.2", 0, "It is 4."),
    ]
    answer = [frame for frame in frames if frame["type"] == "answer.delta"]
    assert [(f["segment"], f["offset"], f["text"]) for f in answer] == [("2.3", 0, "4")]


def test_a_reply_replaced_by_its_step_within_the_interval_sends_no_live_frame(
    published, conversation_id, monkeypatch
):
    """A fast reply is written, parsed and stored before the run's loop would send it: the
    stored step carries the text, so a live frame would only be replaced at once."""
    frames, _ = published
    monkeypatch.setattr(live, "FLUSH_SECONDS", 0.01)
    text = live.LiveText(conversation_id=conversation_id, run_id=7, attempt=1)

    async def engine():
        for word in ["I should ", "add.", ""]:
            text.thought_delta(thought(word, done=not word))
        await asyncio.sleep(0)  # the stream's last read; far less than the interval
        yield ModelCallRecord(index=0, messages=[], options={}, response_text="")
        yield ThoughtStep(text="I should add.")
        yield ActionStep(tool="calculator", tool_input="2+2", call_id="call-1")
        # Long past the interval: the timer left behind finds nothing to send.
        await asyncio.sleep(live.FLUSH_SECONDS * 10)

    async def drive():
        async for _ in text.track(engine()):
            pass

    asyncio.run(drive())
    assert frames == []
    assert snapshot(conversation_id) == []


def test_on_the_runs_loop_the_first_words_wait_for_the_interval_with_what_follows(
    published, conversation_id
):
    frames, sent = published
    text = live.LiveText(conversation_id=conversation_id, run_id=7, attempt=1)

    async def words():
        text.answer_delta("The sum ")
        await asyncio.sleep(0)
        text.answer_delta("is 4.")
        assert frames == []  # gathered, not sent as each arrives
        assert await asyncio.to_thread(sent.wait, 5)  # a ceiling, not a measurement
        assert [(frame["offset"], frame["text"]) for frame in frames] == [(0, "The sum is 4.")]
        assert (await asnapshot(conversation_id))[0]["text"] == "The sum is 4."

    asyncio.run(words())


def test_an_engine_error_drops_the_text_before_the_ending_is_stored(published, conversation_id):
    text = live.LiveText(conversation_id=conversation_id, run_id=7, attempt=1)

    async def engine():
        text.answer_delta("Half an ans")
        yield ModelCallRecord(index=0, messages=[], options={}, response_text="")
        raise RuntimeError("the model went away")

    async def drive():
        async for _ in text.track(engine()):
            pass

    with pytest.raises(RuntimeError):
        asyncio.run(drive())
    assert snapshot(conversation_id) == []


def test_nothing_live_means_an_empty_snapshot(conversation_id):
    assert snapshot(conversation_id) == []


def test_text_without_its_header_is_not_sent(conversation_id, redis_client):
    """A key deleted while a worker appended to it holds only the end of a text."""
    redis_client.append(live.key(conversation_id, "answer"), "the end of it")
    assert snapshot(conversation_id) == []


def test_another_sites_live_text_of_a_conversation_with_the_same_id_is_not_read(
    conversation_id, redis_client
):
    """Two sites (or two test sessions) on one Redis number their conversations alike; the
    live text is kept under the channel layer's prefix, so neither reads the other's."""
    layer = settings.CHANNEL_LAYERS["default"]
    another = {"default": {**layer, "CONFIG": {**layer["CONFIG"], "prefix": "another-site.0"}}}
    with override_settings(CHANNEL_LAYERS=another):
        theirs = live.key(conversation_id, "answer")
    mine = live.key(conversation_id, "answer")
    assert theirs != mine
    try:
        redis_client.set(theirs, "7:1.1:Their words")
        assert snapshot(conversation_id) == []
        redis_client.set(mine, "7:1.1:My words")
        assert [frame["text"] for frame in snapshot(conversation_id)] == ["My words"]
    finally:
        redis_client.delete(theirs)


def test_an_answer_that_was_a_thought_is_taken_back(published, conversation_id):
    """Native mode: the reply's text streamed as the answer, then tool calls followed."""
    frames, _ = published
    text = live.LiveText(conversation_id=conversation_id, run_id=7, attempt=1)
    text.answer_delta("Let me check the weather.")
    text.answer_reset()
    text.thought_delta(thought("Let me check the weather.", done=True))
    answers = [frame for frame in frames if frame["type"] == "answer.delta"]
    assert [(f["offset"], f["text"]) for f in answers] == [
        (0, "Let me check the weather."),
        (0, ""),
    ]
    assert answers[0]["segment"] != answers[1]["segment"]
    assert [frame["type"] for frame in snapshot(conversation_id)] == ["thought.delta"]
