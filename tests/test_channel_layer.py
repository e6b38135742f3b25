"""chatsite/server/patches/channels_redis.py: a consumer's own channel lives in its process,
groups in Redis."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from chatsite.server.patches.channels_redis import LocalChannelsPubSubLayer
from tests.group import subscribed_in_redis

RECEIVE_TIMEOUT = 10


def test_the_project_uses_it():
    assert isinstance(get_channel_layer(), LocalChannelsPubSubLayer)


def test_a_new_channel_takes_no_subscription_and_a_group_does():
    layer = get_channel_layer()
    prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]

    async def body():
        channel = await layer.new_channel()
        await layer.group_add("layer-test", channel)
        subscribed = await subscribed_in_redis()
        await layer.group_discard("layer-test", channel)
        after = await subscribed_in_redis()
        await layer.flush()
        return channel, subscribed, after

    channel, subscribed, after = async_to_sync(body)()
    assert channel.startswith(prefix)
    assert channel not in subscribed
    assert f"{prefix}__group__layer-test" in subscribed
    assert f"{prefix}__group__layer-test" not in after


def test_a_send_to_a_channel_of_this_process_arrives_without_redis():
    layer = get_channel_layer()

    async def body():
        channel = await layer.new_channel()
        await layer.send(channel, {"type": "chat.test", "n": 1})
        await layer.send(channel, {"type": "chat.test", "n": 2})
        received = [
            await asyncio.wait_for(layer.receive(channel), RECEIVE_TIMEOUT) for _ in range(2)
        ]
        await layer.flush()
        return received

    assert async_to_sync(body)() == [{"type": "chat.test", "n": 1}, {"type": "chat.test", "n": 2}]


def test_a_group_message_reaches_every_member_channel_through_redis():
    layer = get_channel_layer()

    async def body():
        first, second = await layer.new_channel(), await layer.new_channel()
        for channel in (first, second):
            await layer.group_add("layer-test-members", channel)
        await layer.group_send("layer-test-members", {"type": "chat.test", "text": "hello"})
        received = [
            await asyncio.wait_for(layer.receive(channel), RECEIVE_TIMEOUT)
            for channel in (first, second)
        ]
        await layer.flush()
        return received

    assert async_to_sync(body)() == [{"type": "chat.test", "text": "hello"}] * 2


def test_delivering_here_never_publishes():
    layer = get_channel_layer()
    prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]

    async def body():
        channel = await layer.new_channel()
        delivered = layer.deliver_here(channel, {"type": "chat.test"})
        received = await asyncio.wait_for(layer.receive(channel), RECEIVE_TIMEOUT)
        client = aioredis.Redis.from_url(settings.REDIS_URL)
        pubsub = client.pubsub()
        try:
            await pubsub.subscribe(f"{prefix}specific.gone")
            await pubsub.get_message(timeout=1)  # the subscription's confirmation
            # A channel not in this process: nothing is delivered, and nothing published.
            gone = layer.deliver_here(f"{prefix}specific.gone", {"type": "chat.test"})
            published = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
        finally:
            await pubsub.aclose()
            await client.aclose()
        await layer.flush()
        return delivered, received, gone, published

    delivered, received, gone, published = async_to_sync(body)()
    assert (delivered, received) == (True, {"type": "chat.test"})
    assert (gone, published) == (False, None)


def test_a_receive_cancelled_forgets_the_channel():
    layer = get_channel_layer()

    async def body():
        channel = await layer.new_channel()
        waiting = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # The message finds no queue here, so it goes to Redis, where no one listens.
        await layer.send(channel, {"type": "chat.test"})
        known = channel in layer._get_layer().channels
        await layer.flush()
        return known

    assert async_to_sync(body)() is False
