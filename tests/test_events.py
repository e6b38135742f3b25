"""Ephemeral frames with kept text: the text is in Redis, in order, before the frame is out."""

from __future__ import annotations

import uuid

import pytest
import redis
from django.conf import settings

from agents import events
from tests.group import GroupListener


@pytest.fixture
def kept_key():
    client = redis.Redis.from_url(settings.REDIS_URL)
    name = f"chatsite:test-kept:{uuid.uuid4().hex}"
    yield client, name
    client.delete(name)


def test_kept_text_is_set_then_appended_before_each_frame_goes_out(kept_key):
    client, name = kept_key
    conversation_id = 10_000_000 + uuid.uuid4().int % 1_000_000
    listener = GroupListener(conversation_id)

    for n, (value, replace) in enumerate([("1:1.1:Hel", True), ("lo", False), (" you", False)]):
        keep = events.KeptText(key=name, value=value, replace=replace, ttl_ms=60_000)
        events.publish_ephemeral(conversation_id, {"type": "answer.delta", "n": n}, keep=keep)
    assert events.publish_flush(timeout=5)

    assert client.get(name) == b"1:1.1:Hello you"
    assert 0 < client.pttl(name) <= 60_000
    assert [frame["n"] for frame in listener.frames()] == [0, 1, 2]


def test_a_frame_still_goes_out_when_its_text_cannot_be_kept(kept_key, monkeypatch):
    client, name = kept_key
    conversation_id = 10_000_000 + uuid.uuid4().int % 1_000_000
    listener = GroupListener(conversation_id)
    # APPEND works on any string, so make the write fail: a hash under the key.
    client.delete(name)
    client.hset(name, "field", "value")

    keep = events.KeptText(key=name, value="text", replace=False, ttl_ms=60_000)
    events.publish_ephemeral(conversation_id, {"type": "answer.delta", "n": 0}, keep=keep)
    assert events.publish_flush(timeout=5)

    assert [frame["n"] for frame in listener.frames()] == [0]


def test_dropping_kept_text_waits_for_the_frames_submitted_before(kept_key):
    client, name = kept_key
    conversation_id = 10_000_000 + uuid.uuid4().int % 1_000_000
    for n in range(50):
        keep = events.KeptText(key=name, value=f"{n} ", replace=n == 0, ttl_ms=60_000)
        events.publish_ephemeral(conversation_id, {"type": "answer.delta", "n": n}, keep=keep)

    assert events.drop_kept([name])

    # No write queued before the drop lands after it.
    assert events.publish_flush(timeout=5)
    assert client.get(name) is None


def test_a_batch_redis_refuses_is_reported_and_the_next_one_goes_out(request):
    """The sender survives a Redis it cannot reach: the drop says so, later frames go out."""
    import socket

    import redis.asyncio

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    publisher = events._Publisher()
    request.addfinalizer(publisher._sender.cancel)
    publisher._redis = redis.asyncio.Redis(host="127.0.0.1", port=closed_port, socket_timeout=1)
    dropped = publisher.submit(events._Drop(["chatsite:test-kept:nowhere"]))
    assert dropped is not None
    assert dropped.result(timeout=10) is False

    publisher._redis = None  # Redis is back
    conversation_id = 10_000_000 + uuid.uuid4().int % 1_000_000
    listener = GroupListener(conversation_id)
    publisher.send(conversation_id, [{"type": "answer.delta", "n": 7}])
    flushed = publisher.submit(events._Drop([]))
    assert flushed is not None
    assert flushed.result(timeout=10) is True
    assert [frame["n"] for frame in listener.frames()] == [7]
