"""The usage ledger and the daily token quota (agents/services/usage.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agents.models import AgentRun, UsageEntry
from agents.protocol import RequestRefused
from agents.services.conversations import (
    conversation_create,
    conversation_delete,
    message_send,
    run_cancel,
)
from agents.services.defaults import ensure_defaults
from agents.services.usage import (
    QuotaExceeded,
    quota_left_today,
    usage_by_user_day,
    usage_reserve_again,
)
from tests.usage import spend

pytestmark = pytest.mark.django_db

T = TypeVar("T")


def _all_at_once(work: Callable[[T], str], items: list[T]) -> list[str]:
    """``work(item)`` for each item on a thread and a connection of its own, all released
    at once: each returns what came of it."""
    start = threading.Barrier(len(items))
    outcomes: list[str] = []

    def one(item: T) -> None:
        try:
            start.wait()
            outcomes.append(work(item))
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def _end(run: AgentRun) -> None:
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.SUCCEEDED)


def test_deleting_the_conversation_does_not_give_the_tokens_back(user, default_profile, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000
    spent = conversation_create(owner=user)
    run = message_send(conversation=spent, user=user, content="a long question").run
    spend(run, prompt_tokens=900, completion_tokens=150)
    _end(run)

    conversation_delete(conversation=spent)
    fresh = conversation_create(owner=user)
    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=fresh, user=user, content="one more")

    assert refused.value.code == "quota_exceeded"
    assert not fresh.messages.exists()


def test_the_usage_page_keeps_a_deleted_conversations_tokens(user, default_profile):
    spent = conversation_create(owner=user)
    run = message_send(conversation=spent, user=user, content="hello").run
    spend(run, prompt_tokens=300, completion_tokens=20)
    _end(run)

    conversation_delete(conversation=spent)
    now = timezone.now()
    (row,) = usage_by_user_day(since=now - timedelta(days=1), until=now + timedelta(days=1))

    assert (row.username, row.runs, row.prompt_tokens, row.completion_tokens) == (
        user.username,
        1,
        300,
        20,
    )


def test_a_run_holds_its_reservation_until_it_ends_then_counts_what_it_used(
    user, default_profile, settings
):
    settings.CHAT_DAILY_TOKEN_QUOTA = 10_000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 4000
    run = message_send(conversation=conversation_create(owner=user), user=user, content="q").run
    assert quota_left_today(user_id=user.pk) == 6000  # the whole reservation is held

    spend(run, prompt_tokens=1000, completion_tokens=500)
    assert quota_left_today(user_id=user.pk) == 6000  # used 1500, still holds 2500

    spend(run, prompt_tokens=3000, completion_tokens=1000)
    assert quota_left_today(user_id=user.pk) == 4500  # past its reservation: holds nothing

    _end(run)
    assert quota_left_today(user_id=user.pk) == 4500


def test_a_cancelled_or_deleted_run_releases_its_reservation(user, default_profile, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 10_000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 4000
    cancelled = message_send(conversation=conversation_create(owner=user), user=user, content="q")
    deleted = message_send(conversation=conversation_create(owner=user), user=user, content="q")
    spend(deleted.run, prompt_tokens=100, completion_tokens=0)
    assert quota_left_today(user_id=user.pk) == 2000

    run_cancel(run=cancelled.run, user=user)  # queued: it ends at once
    conversation_delete(conversation=deleted.run.conversation)

    assert quota_left_today(user_id=user.pk) == 9900
    assert UsageEntry.objects.get(run_id=deleted.run.pk).total_tokens == 100


def test_the_reservation_never_exceeds_what_is_left(user, default_profile, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 4000
    first = message_send(conversation=conversation_create(owner=user), user=user, content="q")

    assert UsageEntry.objects.get(run_id=first.run.pk).reserved_tokens == 1000
    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=conversation_create(owner=user), user=user, content="q")
    assert refused.value.code == "quota_exceeded"


@pytest.mark.django_db(transaction=True)
def test_ten_parallel_sends_against_a_small_quota_start_one_run(user, settings):
    """Ten threads send at once, each on its own connection: the quota check and the
    reservation happen under one lock, so only the first start gets through."""
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000
    settings.CHAT_SENDS_PER_MINUTE = 0
    ensure_defaults()
    conversations = [conversation_create(owner=user) for _ in range(10)]

    def send(conversation) -> str:
        try:
            message_send(conversation=conversation, user=user, content="in parallel")
        except RequestRefused as refusal:
            return refusal.code
        return "sent"

    outcomes = _all_at_once(send, conversations)

    assert sorted(outcomes) == ["quota_exceeded"] * 9 + ["sent"]
    assert AgentRun.objects.filter(conversation__owner=user).count() == 1


def _paused(user, *, used: int, reserved: int) -> AgentRun:
    """A run of ``user``'s stopped at a budget, whose entry used (three quarters prompt,
    a quarter completion) and holds so much."""
    run = message_send(conversation=conversation_create(owner=user), user=user, content="q").run
    completion = used // 4
    UsageEntry.objects.filter(run_id=run.pk).update(
        prompt_tokens=used - completion, completion_tokens=completion, reserved_tokens=reserved
    )
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.OUT_OF_BUDGET)
    run.refresh_from_db()
    return run


def test_a_resumed_run_may_use_what_it_already_holds(user, default_profile, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 0  # the run is sent without a quota, then one applies
    run = _paused(user, used=200, reserved=1000)
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 500
    # Its own 800 held tokens fill the day: nothing is left for anyone else.
    assert quota_left_today(user_id=user.pk) == 0

    usage_reserve_again(user_id=user.pk, run=run)

    # What it held counts as left for it: it goes on with a fresh share on top of its use.
    assert UsageEntry.objects.get(run_id=run.pk).reserved_tokens == 200 + 500
    assert quota_left_today(user_id=user.pk) == 300


def test_a_resumed_run_with_no_ledger_entry_goes_on_while_a_token_is_left(
    user, default_profile, settings
):
    """A run queued before the ledger existed has no entry, so it holds nothing: its resume
    goes on while anything is left today, and is refused once nothing is."""
    settings.CHAT_DAILY_TOKEN_QUOTA = 0
    run = _paused(user, used=0, reserved=0)
    UsageEntry.objects.filter(run_id=run.pk).delete()
    other = _paused(user, used=999, reserved=999)
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000

    usage_reserve_again(user_id=user.pk, run=run)  # one token left

    UsageEntry.objects.filter(run_id=other.pk).update(prompt_tokens=1000, completion_tokens=0)
    with pytest.raises(QuotaExceeded):
        usage_reserve_again(user_id=user.pk, run=run)
    assert not UsageEntry.objects.filter(run_id=run.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_ten_runs_resumed_at_once_share_what_is_left_one_after_another(user, settings):
    """Ten paused runs resumed at once, each on its own connection: each takes its share
    under the user's lock, so only the first finds anything left."""
    settings.CHAT_DAILY_TOKEN_QUOTA = 0
    settings.CHAT_SENDS_PER_MINUTE = 0
    ensure_defaults()
    runs = [_paused(user, used=100, reserved=100) for _ in range(10)]
    settings.CHAT_DAILY_TOKEN_QUOTA = 1500
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 500

    def resume(run: AgentRun) -> str:
        try:
            with transaction.atomic():
                usage_reserve_again(user_id=user.pk, run=run)
        except QuotaExceeded:
            return "quota_exceeded"
        return "resumed"

    outcomes = _all_at_once(resume, runs)

    assert sorted(outcomes) == ["quota_exceeded"] * 9 + ["resumed"]
    assert quota_left_today(user_id=user.pk) == 0


def test_a_workers_writes_count_in_the_ledger_on_every_path(user, default_profile):
    """The worker's writes (fenced: one statement each on PostgreSQL) add each model call's
    tokens to the ledger the quota reads, for a step and for the run's last reply alike."""
    from agents.react.types import FinalAnswerStep, ModelCallRecord, ThoughtStep
    from agents.runs.store import run_claim, run_finish, run_record_steps

    queued = message_send(conversation=conversation_create(owner=user), user=user, content="q")
    run = run_claim(run_id=queued.run.pk, worker_id="w1")

    def call(prompt: int, completion: int) -> ModelCallRecord:
        return ModelCallRecord(
            index=0, messages=[], options={}, response_text="", tool_calls=[],
            prompt_tokens=prompt, completion_tokens=completion, duration_ms=1,
        )  # fmt: skip

    run_record_steps(run=run, steps=[call(100, 20), ThoughtStep(text="t")], worker_id="w1")
    entry = UsageEntry.objects.get(run_id=run.pk)
    assert (entry.prompt_tokens, entry.completion_tokens) == (100, 20)

    run_finish(run=run, step=FinalAnswerStep(text="a"), worker_id="w1", preceding=[call(300, 40)])
    entry.refresh_from_db()
    assert (entry.prompt_tokens, entry.completion_tokens) == (400, 60)
