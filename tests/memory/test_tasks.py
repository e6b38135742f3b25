"""The summariser task: enqueued after commit, retried with backoff, harmless when repeated."""

from __future__ import annotations

import pytest

from agents.llm.scripted import Fail
from agents.memory.services import SummaryRequest, memory_after_run, summary_request
from agents.memory.tasks import MAX_RETRIES, memory_summary_create
from agents.models import MemorySummary, UsageEntry
from agents.profile_snapshot import ProfileSnapshot
from agents.react.errors import ModelAuthError
from agents.services.usage import quota_left_today
from tests.memory.conftest import add_turn, assert_summaries_tile_the_history, filler

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_conversation(conversation, memory_profile):
    conversation.profile = memory_profile(budget=300)
    conversation.save(update_fields=["profile"])
    add_turn(conversation, "Remember that my cat is called Miso.", "Miso, noted.")
    for _ in range(8):
        add_turn(conversation, filler(25), filler(25))
    return conversation


def message_rows(conversation):
    return list(conversation.messages.order_by("id").values_list("id", "role", "content"))


def test_after_run_enqueues_the_task_on_commit(
    long_conversation, eager_tasks, django_capture_on_commit_callbacks
):
    snapshot = ProfileSnapshot.from_profile(long_conversation.profile)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert memory_after_run(conversation=long_conversation, snapshot=snapshot)
        assert not MemorySummary.objects.exists()  # nothing happens before the commit

    for callback in callbacks:
        callback()

    (summary,) = assert_summaries_tile_the_history(long_conversation)
    assert "my cat is called Miso" in summary.text


def test_server_errors_are_retried_and_nothing_is_lost(
    long_conversation, scripted_server, summariser_name
):
    before = message_rows(long_conversation)
    scripted_server.script(summariser_name, [Fail(500), Fail(503)])

    result = memory_summary_create.apply(args=[long_conversation.pk])

    assert result.successful()
    (summary,) = assert_summaries_tile_the_history(long_conversation)
    assert result.result == summary.pk
    assert len(scripted_server.requests(summariser_name)) == 3
    assert message_rows(long_conversation) == before


def test_a_summariser_down_for_good_gives_up_after_bounded_retries_losing_nothing(
    long_conversation, scripted_server, summariser_name
):
    before = message_rows(long_conversation)
    scripted_server.script(summariser_name, [Fail(500)] * (MAX_RETRIES + 1))

    result = memory_summary_create.apply(args=[long_conversation.pk])

    assert result.failed()
    assert len(scripted_server.requests(summariser_name)) == MAX_RETRIES + 1
    assert not MemorySummary.objects.filter(conversation=long_conversation).exists()
    assert message_rows(long_conversation) == before


def test_the_task_is_idempotent_and_ignores_deleted_conversations(
    long_conversation, scripted_server, summariser_name
):
    first = memory_summary_create.apply(args=[long_conversation.pk]).result
    again = memory_summary_create.apply(args=[long_conversation.pk]).result

    assert first is not None
    assert again is None
    assert len(assert_summaries_tile_the_history(long_conversation)) == 1

    conversation_id = long_conversation.pk
    long_conversation.delete()
    assert memory_summary_create.apply(args=[conversation_id]).result is None


def test_compact_summarises_everything_at_once(
    long_conversation, user, eager_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        assert summary_request(conversation=long_conversation, user=user) == SummaryRequest.QUEUED

    (summary,) = assert_summaries_tile_the_history(long_conversation)
    assert summary.covers_through == long_conversation.messages.order_by("id").last()
    assert "covered 9 turns" in summary.text


def test_a_rejected_key_is_not_retried(long_conversation, scripted_server, summariser_name):
    scripted_server.script(summariser_name, [Fail(401)])

    result = memory_summary_create.apply(args=[long_conversation.pk])

    assert result.failed()
    assert isinstance(result.result, ModelAuthError)
    assert len(scripted_server.requests(summariser_name)) == 1
    assert not MemorySummary.objects.filter(conversation=long_conversation).exists()


def test_summaries_queued_under_the_tasks_old_name_still_run(
    long_conversation, scripted_server, summariser_name
):
    """Enqueued (or waiting out a retry) before the task was named after its service."""
    from chatsite.celery import app

    scripted_server.script(summariser_name, [Fail(500)])

    result = app.tasks["agents.memory.tasks.summarize_conversation"].apply(
        args=[long_conversation.pk]
    )

    assert result.successful()  # retried like the task under its new name
    (summary,) = assert_summaries_tile_the_history(long_conversation)
    assert result.result == summary.pk


def test_summaries_count_against_the_daily_quota(
    long_conversation, user, scripted_server, summariser_name, settings
):
    settings.CHAT_DAILY_TOKEN_QUOTA = 1_000_000

    memory_summary_create.apply(args=[long_conversation.pk])

    (entry,) = UsageEntry.objects.filter(user=user, kind=UsageEntry.Kind.SUMMARY)
    calls = scripted_server.requests(summariser_name)
    assert calls
    assert entry.total_tokens > 0
    assert entry.settled_at is not None  # the task ended: its reservation is released
    assert quota_left_today(user_id=user.pk) == 1_000_000 - entry.total_tokens


def test_automatic_summarising_over_quota_calls_no_model(
    long_conversation, user, scripted_server, summariser_name, settings
):
    settings.CHAT_DAILY_TOKEN_QUOTA = 100
    UsageEntry.objects.create(user=user, kind=UsageEntry.Kind.RUN, prompt_tokens=100)

    result = memory_summary_create.apply(args=[long_conversation.pk])

    assert result.successful()
    assert result.result is None
    assert scripted_server.requests(summariser_name) == []
    assert not MemorySummary.objects.filter(conversation=long_conversation).exists()
