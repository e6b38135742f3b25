"""``message.created`` as a send stores it: the payload ``agents.protocol`` builds, whether
PostgreSQL's one statement writes it (only the message's id is set in SQL) or the ORM does,
for the same messages. Compared with the builder applied to the stored message."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.db import statements
from agents.models import AgentRun, Message, RunEvent
from agents.protocol import message_created_payload
from agents.services.conversations import conversation_create, message_send

pytestmark = pytest.mark.django_db

CONTENTS = [
    "hi",
    "Is 🙂 two code units? ' \" \\ %s {message,id} $1",
    "line one\nline two\ttabbed",
    "x" * 2000,
]


def _sent_payloads(user, *, one_statement: bool) -> list[tuple[dict, dict]]:
    """Each content sent in its own conversation: (stored payload, the builder's)."""
    pairs = []
    for number, content in enumerate(CONTENTS):
        conversation = conversation_create(owner=user)
        with CaptureQueriesContext(connection) as queries:
            result = message_send(
                conversation=conversation, user=user, content=content, client_id=f"c{number}"
            )
        took = any("new_message" in query["sql"] for query in queries.captured_queries)
        assert took == one_statement, "the send took the other path"
        AgentRun.objects.filter(pk=result.run.pk).update(status=AgentRun.Status.SUCCEEDED)
        event = RunEvent.objects.get(conversation=conversation, type="message.created")
        stored = Message.objects.get(pk=result.message.pk)
        pairs.append((event.payload, message_created_payload(stored)))
    return pairs


@pytest.mark.parametrize("one_statement", [True, False], ids=["one-statement", "orm"])
def test_a_sends_stored_payload_is_the_protocols(user, monkeypatch, one_statement):
    if one_statement and not statements.fenced_statements_supported():
        pytest.skip("this database has no one-statement send; the ORM case covers it")
    if not one_statement:
        monkeypatch.setattr(statements, "fenced_statements_supported", lambda: False)
    for stored, built in _sent_payloads(user, one_statement=one_statement):
        assert stored == built
        assert stored["message"]["id"] == built["message"]["id"]
