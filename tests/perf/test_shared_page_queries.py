"""The shared page's queries do not grow with the conversation (as in test_query_counts)."""

from __future__ import annotations

import pytest

from agents.services.conversations import conversation_create
from agents.services.shares import share_create
from tests.answers import finished_answer
from tests.perf.history import add_turns
from tests.perf.test_query_counts import PAGE_QUERIES, count_queries, flat

pytestmark = pytest.mark.django_db


def test_shared_page_queries_stay_flat(client, user, other_user, django_assert_max_num_queries):
    conversation = conversation_create(owner=user)
    finished_answer(conversation=conversation)
    share, _ = share_create(conversation=conversation)
    client.force_login(other_user)

    def load() -> None:
        assert client.get(f"/s/{share.token}/").status_code == 200

    small = count_queries(load)
    add_turns(conversation, 300)
    for _ in range(20):
        finished_answer(conversation=conversation)
    flat(small, load, django_assert_max_num_queries, PAGE_QUERIES)
