"""Open chats hear about a new summary, once it is committed."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import channel_layers

from agents import events
from agents.memory.services import memory_summary_create
from agents.models import Conversation
from tests.memory.conftest import add_turn

pytestmark = pytest.mark.django_db(transaction=True)


def received_frames(layer, channel: str) -> list[dict]:
    async def drain() -> list[dict]:
        frames = []
        while True:
            try:
                message = await asyncio.wait_for(layer.receive(channel), 0.5)
            except TimeoutError:
                return frames
            frames.extend(message["frames"])

    return async_to_sync(drain)()


def test_a_stored_summary_is_announced_to_the_conversation_group(user, memory_profile, summariser):
    conversation = Conversation.objects.create(owner=user, profile=memory_profile(budget=2000))
    add_turn(conversation, "Remember that my name is Ada.", "Hello Ada.")
    layer = channel_layers.make_backend("default")
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(conversation.pk), channel)

    summary = memory_summary_create(conversation=conversation, chat_model=summariser, force=True)
    assert events.publish_flush()

    frames = received_frames(layer, channel)
    assert [frame for frame in frames if frame["type"] == "memory.summarized"] == [
        {
            "type": "memory.summarized",
            "summary_id": summary.pk,
            "covers_through": summary.covers_through_id,
            "token_count": summary.token_count,
            "text": summary.text,
        }
    ]
