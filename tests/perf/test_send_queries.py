"""What one message sent on the socket costs the database: pinned, so it cannot grow back.

The socket's send is one database call of the consumer (``_message_send``: the session check,
then ``message_send``); it is counted here in the test's thread, called as the consumer's
database thread calls it. The figure is the PostgreSQL one; docs/performance.md#send says
which statements they are.
"""

from __future__ import annotations

from importlib import import_module

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from agents.consumers import ConversationConsumer
from agents.models import AgentRun, Message
from agents.services.conversations import conversation_create
from tests.perf.test_query_counts import count_queries

pytestmark = pytest.mark.django_db


# The conversation's row lock with the profile a run would use (the default one, the
# conversation having none), its endpoint, its latest prompt version, its tools, whether its
# groups allow the user, and the session with its user (agents/session_check.py) (1); one
# read of its messages and runs (1); then the message, the run, its ledger entry, the seq
# bump with the conversation's own changes and the event: one statement on PostgreSQL, five
# elsewhere (three INSERTs, the bump, the event's INSERT); plus the (save)point and its
# release.
def send_statements() -> int:
    return 5 if connection.vendor == "postgresql" else 9


def socket_send(user, conversation, *, content: str, client_id: str) -> None:
    client = Client()
    client.force_login(user)
    session_key = client.cookies[settings.SESSION_COOKIE_NAME].value
    consumer = ConversationConsumer()
    session_store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    consumer.scope = {"user": user, "session": session_store}
    consumer.conversation_id = conversation.pk
    send = ConversationConsumer._message_send.__wrapped__  # without the database thread

    def sent() -> None:
        send(consumer, content, client_id, None, None)

    return sent


@pytest.mark.parametrize("turn", [1, 3])
def test_a_socket_send_costs_a_pinned_number_of_statements(user, turn):
    conversation = conversation_create(owner=user)
    for earlier in range(1, turn):
        socket_send(user, conversation, content=f"q{earlier}", client_id=f"c{earlier}")()
        AgentRun.objects.filter(conversation=conversation).update(status=AgentRun.Status.SUCCEEDED)

    assert (
        count_queries(socket_send(user, conversation, content="go", client_id="c"))
        == send_statements()
    )
    message = Message.objects.get(conversation=conversation, client_id="c")
    assert message.on_active_branch
    conversation.refresh_from_db()
    assert conversation.active_leaf_id == message.pk
    assert conversation.title == ("go" if turn == 1 else "q1")


def test_a_repeated_client_id_reads_and_writes_nothing_more(user):
    conversation = conversation_create(owner=user)
    send = socket_send(user, conversation, content="go", client_id="c")
    send()
    # The session (1), the lock (1), the read under it (1), the message and its run (2).
    assert count_queries(send) <= 7
    assert Message.objects.filter(conversation=conversation).count() == 1
