"""Open chats hear about a new summary, once it is committed."""

from __future__ import annotations

import pytest

from agents import events
from agents.memory.summaries import memory_summary_create
from agents.models import Conversation
from tests.group import GroupListener
from tests.memory.conftest import add_turn

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stored_summary_is_announced_to_the_conversation_group(user, memory_profile, summariser):
    conversation = Conversation.objects.create(owner=user, profile=memory_profile(budget=2000))
    add_turn(conversation, "Remember that my name is Ada.", "Hello Ada.")
    listener = GroupListener(conversation.pk)

    summary = memory_summary_create(conversation=conversation, chat_model=summariser, force=True)
    assert events.publish_flush()

    frames = listener.frames()
    assert [frame for frame in frames if frame["type"] == "memory.summarized"] == [
        {
            "type": "memory.summarized",
            "summary_id": summary.pk,
            "covers_through": summary.covers_through_id,
            "token_count": summary.token_count,
            "text": summary.text,
        }
    ]
