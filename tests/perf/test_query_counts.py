"""Database queries per page, per API call and per stored step do not grow with history.

Each test counts the queries at a small size, then grows the history (rows made with
``bulk_create``) and requires no more queries than before. The sizes here are a few hundred
to keep the suite fast; ``bench/query_counts.py`` runs the same measures at 10,000
conversations and 2,000 messages (docs/performance.md#query-counts).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import AgentRun, Conversation, Message
from agents.react.types import ObservationStep, ThoughtStep
from agents.runs.store import run_claim, run_record_step
from agents.services.conversations import conversation_create, message_send
from tests.perf.history import add_conversations, add_turns

pytestmark = pytest.mark.django_db

# Ceilings: a page or call that needs more than this has grown a per-row query. The chat
# page reads the user's monthly budgets too (the warning from 80 %), the user's folders
# and the bell's unread count (filled in by the server), one statement each.
PAGE_QUERIES = 15
API_QUERIES = 8
STEP_QUERIES = 8


def count_queries(action) -> int:
    with CaptureQueriesContext(connection) as captured:
        action()
    return len(captured)


def flat(small: int, action, django_assert_max_num_queries, ceiling: int) -> None:
    assert 0 < small <= ceiling
    with django_assert_max_num_queries(small):
        action()


def test_chat_page_queries_stay_flat(client, user, django_assert_max_num_queries):
    conversation = conversation_create(owner=user)
    add_turns(conversation, 3)
    add_conversations(user, 3)
    client.force_login(user)
    url = f"/c/{conversation.pk}/"

    def load() -> None:
        assert client.get(url).status_code == 200

    small = count_queries(load)
    add_turns(conversation, 200)
    add_conversations(user, 500)
    flat(small, load, django_assert_max_num_queries, PAGE_QUERIES)


def test_conversation_list_api_queries_stay_flat(client, user, django_assert_max_num_queries):
    add_conversations(user, 3)
    client.force_login(user)

    def list_() -> None:
        assert client.get("/api/conversations/").status_code == 200
        assert client.get("/api/conversations/?q=history").status_code == 200

    small = count_queries(list_)
    add_conversations(user, 1000)
    flat(small, list_, django_assert_max_num_queries, 2 * API_QUERIES)


def test_conversation_detail_api_queries_stay_flat(client, user, django_assert_max_num_queries):
    conversation = conversation_create(owner=user)
    add_turns(conversation, 3)
    client.force_login(user)
    url = f"/api/conversations/{conversation.pk}/"

    def fetch() -> None:
        assert client.get(url).status_code == 200

    small = count_queries(fetch)
    add_turns(conversation, 300)
    flat(small, fetch, django_assert_max_num_queries, API_QUERIES)


def test_storing_a_step_costs_the_same_at_any_history(user, django_assert_max_num_queries):
    conversation = conversation_create(owner=user)
    run = message_send(conversation=conversation, user=user, content="go").run
    run = run_claim(run_id=run.pk, worker_id="perf-test")

    def record() -> None:
        run_record_step(run=run, step=ThoughtStep(text="thinking"))
        run_record_step(run=run, step=ObservationStep(tool="calculator", call_id="c1", text="42"))

    small = count_queries(record)
    add_turns(conversation, 500)
    run.conversation.refresh_from_db()
    flat(small, record, django_assert_max_num_queries, 2 * STEP_QUERIES)


def test_sidebar_list_with_pins_runs_and_snippets_stays_flat(
    client, user, django_assert_max_num_queries
):
    """Pinned order, the active-run marker and search snippets add no query per row."""
    add_conversations(user, 3)
    client.force_login(user)

    def grow(count: int) -> None:
        add_conversations(user, count)
        conversations = list(Conversation.objects.filter(owner=user).order_by("-pk")[:count])
        Conversation.objects.filter(pk__in=[c.pk for c in conversations[::3]]).update(
            pinned_at=timezone.now()
        )
        for conversation in conversations[::2]:
            add_turns(conversation, 1)  # a finished run and a matching "history" message
        queued = conversations[1::4]
        messages = Message.objects.bulk_create(
            Message(conversation=c, role=Message.Role.USER, content="history again") for c in queued
        )
        AgentRun.objects.bulk_create(
            AgentRun(conversation=c, trigger_message=m)
            for c, m in zip(queued, messages, strict=True)
        )

    def list_() -> None:
        body = client.get("/api/conversations/?page_size=200").json()
        assert body["results"]
        searched = client.get("/api/conversations/?q=message&page_size=200").json()
        assert searched["results"]

    grow(4)
    small = count_queries(list_)
    grow(300)
    flat(small, list_, django_assert_max_num_queries, 2 * API_QUERIES)
