"""The API's query count does not grow with the amount of history.

docs/performance.md#query-counts.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import AgentRun, Conversation, Message, RunEvent
from agents.services.conversations import conversation_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def queries_for(api, path: str, query: dict | None = None) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = api.get(path, query or {})
    assert response.status_code == 200
    return len(captured)


def add_conversations(user, count: int) -> None:
    Conversation.objects.bulk_create(Conversation(owner=user, title=f"c{n}") for n in range(count))


def add_turns(conversation: Conversation, count: int) -> None:
    """``count`` question/answer pairs, each answer with its run and three events."""
    for n in range(count):
        question = Message.objects.create(conversation=conversation, role="user", content=f"q{n}")
        run = AgentRun.objects.create(
            conversation=conversation, trigger_message=question, status="succeeded"
        )
        Message.objects.create(conversation=conversation, role="assistant", content="a", run=run)
        seq = conversation.last_seq
        RunEvent.objects.bulk_create(
            RunEvent(conversation=conversation, run=run, seq=seq + i, type="step", payload={})
            for i in (1, 2, 3)
        )
        conversation.last_seq = seq + 3
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=conversation.last_seq)


def test_conversation_list_is_flat(api, user):
    add_conversations(user, 3)
    few = queries_for(api, "/api/conversations/")
    add_conversations(user, 300)
    many = queries_for(api, "/api/conversations/")
    assert many == few
    assert queries_for(api, "/api/conversations/", {"q": "c1"}) == few


def test_conversation_detail_is_flat(api, user):
    conversation = conversation_create(owner=user)
    add_turns(conversation, 2)
    few = queries_for(api, f"/api/conversations/{conversation.pk}/")
    add_turns(conversation, 200)
    many = queries_for(api, f"/api/conversations/{conversation.pk}/")
    assert many == few


def test_export_is_flat(api, user):
    conversation = conversation_create(owner=user)
    add_turns(conversation, 2)
    few = queries_for(api, f"/api/conversations/{conversation.pk}/export/", {"format": "json"})
    add_turns(conversation, 200)
    many = queries_for(api, f"/api/conversations/{conversation.pk}/export/", {"format": "json"})
    assert many == few
