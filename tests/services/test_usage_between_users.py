"""The usage ledger with more than one user, more than one entry and more than one price: each
user's quota counts only that user's tokens and reservations, settling one summary settles
only it, and the usage page adds up every endpoint's cost (agents/services/usage.py)."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.models import AgentRun, ModelConfig, UsageEntry
from agents.protocol import RequestRefused
from agents.services.conversations import (
    conversation_create,
    conversation_delete,
    message_send,
    run_regenerate,
)
from agents.services.usage import (
    SUMMARY_RESERVATION_SECONDS,
    QuotaExceeded,
    quota_left_today,
    tokens_used_today,
    usage_by_user_day,
    usage_check_quota,
    usage_record_run_tokens,
    usage_record_tokens,
    usage_reserve,
    usage_settle,
)
from tests.clock import PinnedClock
from tests.usage import spend

pytestmark = pytest.mark.django_db


def test_one_users_tokens_never_count_against_another_users_quota(
    user, other_user, default_profile, settings
):
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 400
    # Alice spends her whole day's quota, and her run still holds its reservation.
    run = message_send(conversation=conversation_create(owner=user), user=user, content="q").run
    spend(run, prompt_tokens=900, completion_tokens=150)
    with pytest.raises(RequestRefused):
        message_send(conversation=conversation_create(owner=user), user=user, content="more")

    assert tokens_used_today(user_id=other_user.pk) == 0
    assert quota_left_today(user_id=other_user.pk) == 1000
    usage_check_quota(user_id=other_user.pk)  # Bob is not refused
    sent = message_send(
        conversation=conversation_create(owner=other_user), user=other_user, content="hello"
    )
    assert UsageEntry.objects.get(run_id=sent.run.pk).reserved_tokens == 400


def test_one_users_held_reservations_never_count_against_another(
    user, other_user, default_profile, settings
):
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 600
    message_send(conversation=conversation_create(owner=user), user=user, content="q")
    usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.SUMMARY)

    assert quota_left_today(user_id=user.pk) == 0
    with pytest.raises(QuotaExceeded):
        usage_check_quota(user_id=user.pk)
    assert quota_left_today(user_id=other_user.pk) == 1000


def test_settling_one_summary_leaves_the_others_reservations_held(user, other_user, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 10_000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 3000
    first = usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.SUMMARY)
    second = usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.SUMMARY)
    elsewhere = usage_reserve(user_id=other_user.pk, kind=UsageEntry.Kind.SUMMARY)
    assert quota_left_today(user_id=user.pk) == 4000

    usage_settle(entry=first)

    assert quota_left_today(user_id=user.pk) == 7000  # the second still holds its 3000
    assert quota_left_today(user_id=other_user.pk) == 7000
    unsettled = set(UsageEntry.objects.filter(settled_at__isnull=True).values_list("pk", flat=True))
    assert unsettled == {second.pk, elsewhere.pk}


def test_settling_twice_keeps_the_first_settlement_time(user, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 10_000
    entry = usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.SUMMARY)
    usage_settle(entry=entry)
    settled_at = UsageEntry.objects.get(pk=entry.pk).settled_at

    usage_settle(entry=entry)

    assert UsageEntry.objects.get(pk=entry.pk).settled_at == settled_at


def _endpoint(name: str, prompt: str, completion: str) -> ModelConfig:
    return ModelConfig.objects.create(
        name=name,
        model=name,
        prompt_price_per_million=Decimal(prompt),
        completion_price_per_million=Decimal(completion),
    )


def _priced_entry(config: ModelConfig, **fields) -> UsageEntry:
    """An entry as the ledger opens it: with its endpoint's prices of that moment."""
    return UsageEntry.objects.create(
        model_config=config,
        prompt_price_per_million=config.prompt_price_per_million,
        completion_price_per_million=config.completion_price_per_million,
        **fields,
    )


def test_the_usage_page_adds_every_endpoints_cost_within_a_day(user, other_user):
    cheap = _endpoint("cheap", "1", "2")
    dear = _endpoint("dear", "10", "30")
    for config, prompt, completion in [(cheap, 1000, 500), (dear, 2000, 100), (cheap, 10, 0)]:
        _priced_entry(
            config,
            user=user,
            kind=UsageEntry.Kind.RUN,
            prompt_tokens=prompt,
            completion_tokens=completion,
        )
    _priced_entry(dear, user=user, kind=UsageEntry.Kind.SUMMARY, prompt_tokens=100)
    _priced_entry(dear, user=other_user, kind=UsageEntry.Kind.RUN, prompt_tokens=7)
    now = timezone.now()

    rows = usage_by_user_day(since=now - timedelta(days=1), until=now + timedelta(days=1))

    by_name = {row.username: row for row in rows}
    assert [row.username for row in rows] == [user.username, other_user.username]
    alice = by_name[user.username]
    assert (alice.runs, alice.prompt_tokens, alice.completion_tokens) == (3, 3110, 600)
    assert alice.total_tokens == 3710
    # cheap: 1010 * 1 + 500 * 2; dear: 2100 * 10 + 100 * 30 (per million tokens).
    assert alice.cost == Decimal("0.026010")
    bob = by_name[other_user.username]
    assert (bob.runs, bob.prompt_tokens, bob.cost) == (1, 7, Decimal("0.000070"))


def test_a_summarys_tokens_add_to_its_own_entry_only(user, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 10_000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 1000
    summary = usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.SUMMARY)
    other = usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.SUMMARY)

    usage_record_tokens(entry=summary, prompt_tokens=300, completion_tokens=20)
    usage_record_tokens(entry=summary, prompt_tokens=5, completion_tokens=7)

    summary.refresh_from_db()
    other.refresh_from_db()
    assert (summary.prompt_tokens, summary.completion_tokens) == (305, 27)
    assert (other.prompt_tokens, other.completion_tokens) == (0, 0)
    assert tokens_used_today(user_id=user.pk) == 332


def test_the_usage_page_counts_only_the_period_asked_for(user):
    now = timezone.now()
    for days_ago, prompt in [(3, 1), (1, 10), (0, 100), (-2, 1000)]:
        UsageEntry.objects.create(
            user=user,
            kind=UsageEntry.Kind.RUN,
            prompt_tokens=prompt,
            created_at=now - timedelta(days=days_ago),
        )

    rows = usage_by_user_day(since=now - timedelta(days=2), until=now + timedelta(hours=1))

    assert [(row.day, row.prompt_tokens) for row in rows] == [
        (timezone.localdate(now), 100),
        (timezone.localdate(now - timedelta(days=1)), 10),
    ]


def test_free_endpoints_cost_nothing_and_deleted_ones_keep_what_they_cost(user):
    free = _endpoint("free", "0", "0")
    gone = _endpoint("gone", "5", "5")
    _priced_entry(free, user=user, kind=UsageEntry.Kind.RUN, prompt_tokens=500)
    _priced_entry(gone, user=user, kind=UsageEntry.Kind.RUN, completion_tokens=40)
    gone.delete()  # its entries stay, without an endpoint, with the prices they were run at
    now = timezone.now()

    (row,) = usage_by_user_day(since=now - timedelta(days=1), until=now + timedelta(days=1))

    assert (row.runs, row.prompt_tokens, row.completion_tokens) == (2, 500, 40)
    assert row.cost == Decimal("0.000200")


def test_a_regenerated_run_holds_its_own_reservation_until_it_ends(user, default_profile, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 10_000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 3000
    conversation = conversation_create(owner=user)
    first = message_send(conversation=conversation, user=user, content="q").run
    spend(first, prompt_tokens=100, completion_tokens=0)
    AgentRun.objects.filter(pk=first.pk).update(status=AgentRun.Status.SUCCEEDED)

    again = run_regenerate(conversation=conversation, user=user)

    entry = UsageEntry.objects.get(run_id=again.pk)
    # Counted under its agent, as the usage page's per-agent rows read it.
    assert (entry.kind, entry.conversation_id, entry.model_config_id, entry.profile_id) == (
        UsageEntry.Kind.RUN,
        conversation.pk,
        again.model_config_id,
        again.profile_version.profile_id,
    )
    assert quota_left_today(user_id=user.pk) == 10_000 - 100 - 3000
    AgentRun.objects.filter(pk=again.pk).update(status=AgentRun.Status.SUCCEEDED)
    assert quota_left_today(user_id=user.pk) == 10_000 - 100


def test_a_summarys_entry_names_its_conversation_and_is_priced_by_its_endpoint(user, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 0
    endpoint = _endpoint("summariser", "2", "4")
    conversation = conversation_create(owner=user)

    entry = usage_reserve(
        user_id=user.pk,
        kind=UsageEntry.Kind.SUMMARY,
        conversation_id=conversation.pk,
        model_config_id=endpoint.pk,
    )
    usage_record_tokens(entry=entry, prompt_tokens=1000, completion_tokens=250)

    entry.refresh_from_db()
    assert (entry.run_id, entry.conversation_id, entry.reserved_tokens) == (
        None,
        conversation.pk,
        0,
    )
    now = timezone.now()
    (row,) = usage_by_user_day(since=now - timedelta(days=1), until=now + timedelta(days=1))
    assert (row.user_id, row.runs, row.total_tokens) == (user.pk, 0, 1250)
    assert row.cost == Decimal("0.003000")


def test_the_usage_page_shows_the_newest_day_first(user, other_user):
    now = timezone.now()
    for owner, days_ago in [(other_user, 2), (user, 0), (user, 2), (other_user, 0)]:
        UsageEntry.objects.create(
            user=owner,
            kind=UsageEntry.Kind.RUN,
            prompt_tokens=1,
            created_at=now - timedelta(days=days_ago),
        )

    rows = usage_by_user_day(since=now - timedelta(days=3), until=now + timedelta(hours=1))

    today, before = timezone.localdate(now), timezone.localdate(now - timedelta(days=2))
    assert [(row.day, row.username, row.user_id) for row in rows] == [
        (today, user.username, user.pk),
        (today, other_user.username, other_user.pk),
        (before, user.username, user.pk),
        (before, other_user.username, other_user.pk),
    ]


def test_a_run_queued_before_the_ledger_gets_its_entry_at_its_first_call(
    user, default_profile, settings
):
    settings.CHAT_DAILY_TOKEN_QUOTA = 10_000
    conversation = conversation_create(owner=user)
    run = message_send(conversation=conversation, user=user, content="q").run
    UsageEntry.objects.filter(run_id=run.pk).delete()  # as if queued before the ledger
    started = timezone.now() - timedelta(hours=1)
    AgentRun.objects.filter(pk=run.pk).update(created_at=started)
    run.refresh_from_db()

    spend(run, prompt_tokens=120, completion_tokens=30)
    spend(run, prompt_tokens=1, completion_tokens=2)

    entry = UsageEntry.objects.get(run_id=run.pk)
    assert (entry.user_id, entry.kind, entry.conversation_id, entry.model_config_id) == (
        user.pk,
        UsageEntry.Kind.RUN,
        conversation.pk,
        run.model_config_id,
    )
    assert (entry.prompt_tokens, entry.completion_tokens, entry.created_at) == (121, 32, started)


def test_a_call_stored_after_its_conversation_was_deleted_opens_no_entry(user, default_profile):
    conversation = conversation_create(owner=user)
    run = message_send(conversation=conversation, user=user, content="q").run
    UsageEntry.objects.filter(run_id=run.pk).delete()
    conversation_delete(conversation=conversation)

    usage_record_run_tokens(run=run, prompt_tokens=10, completion_tokens=5)

    assert not UsageEntry.objects.filter(run_id=run.pk).exists()


def test_the_last_token_of_the_quota_can_still_start_a_run(user, default_profile, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 400
    UsageEntry.objects.create(user=user, kind=UsageEntry.Kind.RUN, prompt_tokens=999)

    usage_check_quota(user_id=user.pk)
    sent = message_send(conversation=conversation_create(owner=user), user=user, content="q")

    assert UsageEntry.objects.get(run_id=sent.run.pk).reserved_tokens == 1
    with pytest.raises(QuotaExceeded):
        usage_check_quota(user_id=user.pk)


def test_a_send_entry_names_its_conversation_and_endpoint(user, default_profile, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 0  # no quota: nothing is reserved
    conversation = conversation_create(owner=user)

    run = message_send(conversation=conversation, user=user, content="q").run

    entry = UsageEntry.objects.get(run_id=run.pk)
    assert run.model_config_id is not None
    assert (entry.user_id, entry.conversation_id, entry.model_config_id) == (
        user.pk,
        conversation.pk,
        run.model_config_id,
    )
    assert entry.reserved_tokens == 0


def test_yesterdays_tokens_and_reservations_do_not_count_today(user, default_profile, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 400
    run = message_send(conversation=conversation_create(owner=user), user=user, content="q").run
    spend(run, prompt_tokens=100, completion_tokens=0)
    # The run is still going, but it started before midnight, with yesterday's tokens.
    yesterday = timezone.now() - timedelta(days=1)
    UsageEntry.objects.filter(run_id=run.pk).update(created_at=yesterday)
    UsageEntry.objects.create(
        user=user, kind=UsageEntry.Kind.RUN, prompt_tokens=800, created_at=yesterday
    )

    assert tokens_used_today(user_id=user.pk) == 0
    assert quota_left_today(user_id=user.pk) == 1000


def test_a_summary_whose_task_never_reported_stops_holding_its_reservation(
    user, settings, monkeypatch
):
    settings.CHAT_DAILY_TOKEN_QUOTA = 10_000
    settings.CHAT_QUOTA_RESERVATION_TOKENS = 3000
    noon = timezone.make_aware(datetime.combine(timezone.localdate(), time(12)))
    clock = PinnedClock(noon)
    monkeypatch.setattr(timezone, "now", clock)
    lost = usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.SUMMARY)
    UsageEntry.objects.filter(pk=lost.pk).update(created_at=noon)
    usage_record_tokens(entry=lost, prompt_tokens=200, completion_tokens=0)
    assert quota_left_today(user_id=user.pk) == 7000

    # Its worker died: once the reservation's time is up, only its tokens count.
    clock.advance(SUMMARY_RESERVATION_SECONDS - 1)
    assert quota_left_today(user_id=user.pk) == 7000
    clock.advance(2)
    assert quota_left_today(user_id=user.pk) == 9800
