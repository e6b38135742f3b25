"""Summarisers running at the same time, in threads with their own database connections."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, transaction

from agents.memory.summaries import memory_summary_create
from agents.memory.testing import summariser_policy
from agents.models import Conversation, MemorySummary
from agents.profile_snapshot import profile_snapshot
from tests.memory.conftest import add_turn, assert_summaries_tile_the_history, filler

pytestmark = pytest.mark.django_db(transaction=True)


def in_thread(function):
    """Run ``function`` with a connection of its own, closed afterwards."""

    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        finally:
            connection.close()

    return run


@pytest.fixture
def busy_conversation(user, memory_profile):
    conversation = Conversation.objects.create(owner=user, profile=memory_profile(budget=300))
    add_turn(conversation, "Remember that my name is Grace.", "Hello Grace.")
    for _ in range(10):
        add_turn(conversation, filler(25), filler(25))
    assert profile_snapshot(conversation.profile)["memory_token_budget"] == 300
    return conversation


def test_two_summarisers_from_the_same_summary_store_one_clean_row(
    busy_conversation, summariser, scripted_server, summariser_name
):
    both_asking = threading.Barrier(2, timeout=10)
    calls = []

    def held_until_both_ask(body):
        calls.append(body)
        if len(calls) <= 2:
            both_asking.wait()  # both planned from the same (empty) summary
        return summariser_policy(body)

    scripted_server.policy(summariser_name, held_until_both_ask)
    summarise = in_thread(lambda: memory_summary_create(
        conversation=Conversation.objects.get(pk=busy_conversation.pk), chat_model=summariser
    ))  # fmt: skip

    with ThreadPoolExecutor(2) as pool:
        results = [future.result() for future in [pool.submit(summarise) for _ in range(2)]]

    rows = assert_summaries_tile_the_history(busy_conversation)
    assert len(rows) == 1  # the second result was based on a summary no longer newest
    assert sorted(r.pk if r else 0 for r in results) == [0, rows[0].pk]
    assert "Remember that my name is Grace." in rows[0].text
    assert len(calls) == 2


def test_runs_ending_close_together_produce_one_increasing_sequence(busy_conversation, summariser):
    def turn_then_summarise(worker: int) -> None:
        conversation = Conversation.objects.get(pk=busy_conversation.pk)
        for index in range(4):
            # Like the pipeline, messages are written under the conversation's row lock.
            with transaction.atomic():
                Conversation.objects.select_for_update().get(pk=conversation.pk)
                add_turn(conversation, f"worker {worker} turn {index} " + filler(20), filler(20))
            memory_summary_create(conversation=conversation, chat_model=summariser)
            memory_summary_create(conversation=conversation, chat_model=summariser, force=True)

    with ThreadPoolExecutor(3) as pool:
        for future in [pool.submit(in_thread(turn_then_summarise), w) for w in range(3)]:
            future.result()

    rows = assert_summaries_tile_the_history(busy_conversation)
    assert len(rows) >= 2
    assert "Remember that my name is Grace." in rows[-1].text
    assert MemorySummary.objects.filter(conversation=busy_conversation).count() == len(rows)
