"""Monthly budgets beside the daily quota: a warning in the chat from 80%, and at 100% the
next send refused with the reason and the day the month starts again, through the same check
the daily quota has (agents/services/usage.py, ``usage_check_quota``)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from django.utils.formats import date_format

from agents.models import AgentRun, Message, UsageBudget, UsageEntry
from agents.services.conversations import conversation_create
from agents.services.usage import (
    BudgetReached,
    budget_states,
    budget_warning,
    month_start,
    usage_reserve_again,
    usage_warn_budgets_crossed,
)
from tests.usage_costs.test_usage_page import send_and_spend

pytestmark = pytest.mark.django_db


def first_of_next_month() -> datetime.date:
    today = timezone.localdate()
    if today.month == 12:
        return datetime.date(today.year + 1, 1, 1)
    return datetime.date(today.year, today.month + 1, 1)


def api_send(user, *, content="one more"):
    client = Client()
    client.force_login(user)
    conversation = conversation_create(owner=user)
    response = client.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"content": content},
        content_type="application/json",
    )
    return conversation, response


def test_a_token_budget_used_up_refuses_the_next_send_with_the_reason_and_reset_day(
    user, cheap_agent
):
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    send_and_spend(user, agent=cheap_agent, title="Spent", prompt=900, completion=100)

    conversation, response = api_send(user)

    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "monthly_budget_reached"
    reset = date_format(first_of_next_month(), "DATE_FORMAT")
    assert body["message"] == (
        f"You used this month's budget (1,000 of 1,000 tokens). You can send again on {reset}."
    )
    assert not Message.objects.filter(conversation=conversation).exists()
    assert not AgentRun.objects.filter(conversation=conversation).exists()


def test_a_budget_not_yet_used_up_lets_the_send_through(user, cheap_agent):
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    send_and_spend(user, agent=cheap_agent, title="Spent", prompt=900, completion=99)

    _, response = api_send(user)

    assert response.status_code == 201


def test_a_money_budget_of_a_group_stops_its_members_and_nobody_else(
    user, other_user, make_user, dear_agent
):
    research = Group.objects.create(name="Research")
    carol = make_user("carol")
    research.user_set.add(user, carol)
    UsageBudget.objects.create(group=research, monthly_amount=Decimal("2.50"))
    # Alice spends the group's whole month: a million prompt tokens at 2.50 a million.
    send_and_spend(user, agent=dear_agent, title="Big", prompt=1_000_000, completion=0)

    _, refused = api_send(carol)
    _, allowed = api_send(other_user)

    assert refused.status_code == 429
    assert refused.json()["code"] == "monthly_budget_reached"
    assert refused.json()["message"].startswith(
        "Your group Research used this month's budget (2.50 of 2.50 USD)."
    )
    assert allowed.status_code == 201


def test_last_months_usage_does_not_count(user, cheap_agent):
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    run = send_and_spend(user, agent=cheap_agent, title="Old", prompt=5000, completion=0)
    UsageEntry.objects.filter(run_id=run.pk).update(
        created_at=month_start() - datetime.timedelta(seconds=1)
    )

    _, response = api_send(user)

    assert response.status_code == 201


def test_the_chat_warns_from_80_percent_with_the_reset_day(user, cheap_agent):
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    client = Client()
    client.force_login(user)
    send_and_spend(user, agent=cheap_agent, title="Some", prompt=700, completion=99)
    assert 'id="budget-banner"' not in client.get("/").content.decode()

    send_and_spend(user, agent=cheap_agent, title="More", prompt=1, completion=0)
    page = client.get("/").content.decode()

    reset = date_format(first_of_next_month(), "DATE_FORMAT")
    assert 'id="budget-banner"' in page
    warning = "You used 80% of this month&#x27;s budget (800 of 1,000 tokens)."
    assert f"{warning} It starts again on {reset}." in page
    _, response = api_send(user)
    assert response.status_code == 201  # a warning, not a stop


def test_continuing_a_paused_run_is_refused_once_the_budget_is_used_up(user, cheap_agent):
    UsageBudget.objects.create(user=user, monthly_tokens=100)
    run = send_and_spend(user, agent=cheap_agent, title="Paused", prompt=100, completion=0)

    with pytest.raises(BudgetReached):
        usage_reserve_again(user_id=user.pk, run=run)


def test_another_users_used_up_budget_never_refuses_my_continue(user, other_user, cheap_agent):
    UsageBudget.objects.create(user=other_user, monthly_tokens=10)
    send_and_spend(other_user, agent=cheap_agent, title="Spent", prompt=10, completion=0)
    run = send_and_spend(user, agent=cheap_agent, title="Paused", prompt=100, completion=0)

    usage_reserve_again(user_id=user.pk, run=run)  # not refused


def test_the_refusal_is_translated(user, cheap_agent):
    UsageBudget.objects.create(user=user, monthly_tokens=10)
    send_and_spend(user, agent=cheap_agent, title="Spent", prompt=10, completion=0)
    client = Client(headers={"accept-language": "zh-hans"})
    client.force_login(user)
    conversation = conversation_create(owner=user)

    response = client.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"content": "hi"},
        content_type="application/json",
    )

    assert response.json()["code"] == "monthly_budget_reached"
    assert "本月" in response.json()["message"]


def test_the_sockets_send_is_refused_the_same_way(user, cheap_agent):
    """The socket's send is the consumer's one database call; called as its thread calls it
    (tests/perf/test_send_queries.py), it refuses with the same code and words."""
    from agents.protocol import RequestRefused
    from tests.perf.test_send_queries import socket_send

    UsageBudget.objects.create(user=user, monthly_tokens=10)
    send_and_spend(user, agent=cheap_agent, title="Spent", prompt=10, completion=0)
    conversation = conversation_create(owner=user)

    with pytest.raises(RequestRefused) as refused:
        socket_send(user, conversation, content="hi", client_id="c")()

    assert refused.value.code == "monthly_budget_reached"
    assert "You can send again on" in refused.value.message


def test_a_budget_needs_one_owner_and_a_limit(user):
    from django.core.exceptions import ValidationError

    research = Group.objects.create(name="Research")
    with pytest.raises(ValidationError):
        UsageBudget(user=user, group=research, monthly_tokens=5).full_clean()
    with pytest.raises(ValidationError):
        UsageBudget(user=user).full_clean()
    UsageBudget(user=user, monthly_amount=Decimal("1.00")).full_clean()


def test_an_automatic_summary_calls_no_model_over_a_used_up_budget(user, cheap_agent):
    """A summary's start reserves its ledger entry through ``usage_reserve``, which checks
    the budgets itself: nobody pressed anything, so no send checked them before."""
    from agents.services.usage import usage_reserve

    UsageBudget.objects.create(user=user, monthly_tokens=10)
    send_and_spend(user, agent=cheap_agent, title="Spent", prompt=10, completion=0)

    with pytest.raises(BudgetReached):
        usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.SUMMARY)
    assert not UsageEntry.objects.filter(kind=UsageEntry.Kind.SUMMARY).exists()


def test_another_users_used_up_budget_never_stops_a_users_summary(user, other_user, cheap_agent):
    from agents.services.usage import usage_reserve

    UsageBudget.objects.create(user=other_user, monthly_tokens=10)
    send_and_spend(other_user, agent=cheap_agent, title="Spent", prompt=10, completion=0)

    entry = usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.SUMMARY)
    assert (entry.user_id, entry.kind) == (user.pk, UsageEntry.Kind.SUMMARY)


# --------------------------------------------------------------------------------------
# The warning, live: told when a run takes a budget past its warning share or uses it up
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "run_spends", "told"),
    [
        (700, 150, True),  # 70% -> 85%: past the warning share
        (850, 50, False),  # 85% -> 90%: past it already, the page shows it from its load
        (100, 100, False),  # 10% -> 20%
        (900, 150, True),  # 90% -> 105%: used up
    ],
)
def test_a_run_that_takes_a_budget_past_its_warning_share_is_told(
    user, cheap_agent, before, run_spends, told
):
    budget = UsageBudget.objects.create(user=user, monthly_tokens=1000)
    send_and_spend(user, agent=cheap_agent, title="Earlier", prompt=before, completion=0)
    run = send_and_spend(user, agent=cheap_agent, title="Now", prompt=run_spends, completion=0)

    crossed = usage_warn_budgets_crossed(run_id=run.pk)

    assert crossed == ([budget] if told else [])


def test_a_group_budget_passed_by_one_member_is_told_to_every_member(user, other_user, cheap_agent):
    from agents.services.usage import _covered_users

    group = Group.objects.create(name="Lab")
    group.user_set.add(user, other_user)
    budget = UsageBudget.objects.create(group=group, monthly_tokens=1000)
    send_and_spend(other_user, agent=cheap_agent, title="Theirs", prompt=700, completion=0)
    run = send_and_spend(user, agent=cheap_agent, title="Mine", prompt=200, completion=0)

    assert usage_warn_budgets_crossed(run_id=run.pk) == [budget]
    assert _covered_users([budget]) == {user.pk, other_user.pk}


def test_a_money_budget_counts_the_runs_cost(user, dear_agent):
    # 2.50 and 10.00 a million: 1.25 + 5.00 = 6.25.
    run = send_and_spend(user, agent=dear_agent, title="Now", prompt=500_000, completion=500_000)
    entry = UsageEntry.objects.get(run_id=run.pk)
    cost = (
        entry.prompt_tokens * entry.prompt_price_per_million
        + entry.completion_tokens * entry.completion_price_per_million
    ) / Decimal(1_000_000)
    assert cost == Decimal("6.25")
    # The run alone takes the money budget from nothing to 6.25 / 7.50 (83%); its tokens are
    # far from any token limit.
    budget = UsageBudget.objects.create(user=user, monthly_amount=Decimal("7.50"))

    assert usage_warn_budgets_crossed(run_id=run.pk) == [budget]


@pytest.mark.parametrize(
    ("prompt", "completion", "told"),
    [
        (1_000_000, 0, False),  # 2.50 of 12.00: 21%
        (4_000_000, 0, True),  # 10.00 of 12.00: 83%
        (0, 1_000_000, True),  # 10.00 of 12.00: 83%
    ],
)
def test_a_money_budget_prices_prompt_and_completion_tokens_apart(
    user, dear_agent, prompt, completion, told
):
    # The dear endpoint: 2.50 a million prompt tokens, 10.00 a million completion tokens.
    budget = UsageBudget.objects.create(user=user, monthly_amount=Decimal("12.00"))
    run = send_and_spend(user, agent=dear_agent, title="Now", prompt=prompt, completion=completion)

    assert usage_warn_budgets_crossed(run_id=run.pk) == ([budget] if told else [])


def test_a_money_budget_past_its_warning_share_before_the_run_is_not_told_again(user, dear_agent):
    UsageBudget.objects.create(user=user, monthly_amount=Decimal("10.00"))
    # 3.4 million prompt tokens at 2.50: 8.50 of 10.00 (85%) before the run.
    send_and_spend(user, agent=dear_agent, title="Earlier", prompt=3_400_000, completion=0)
    run = send_and_spend(user, agent=dear_agent, title="Now", prompt=100_000, completion=0)

    assert usage_warn_budgets_crossed(run_id=run.pk) == []


def test_a_run_counted_last_month_tells_nothing_of_this_months_budget(user, cheap_agent):
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    send_and_spend(user, agent=cheap_agent, title="This month", prompt=850, completion=0)
    old = send_and_spend(user, agent=cheap_agent, title="Old", prompt=200, completion=0)
    UsageEntry.objects.filter(run_id=old.pk).update(
        created_at=month_start() - datetime.timedelta(seconds=1)
    )

    # Without its month, the old run's 200 tokens would seem to take 65% to 85%.
    assert usage_warn_budgets_crossed(run_id=old.pk) == []


def test_another_users_budget_is_neither_shown_nor_told_to_me(user, other_user, cheap_agent):
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    UsageBudget.objects.create(user=other_user, monthly_tokens=1000)
    send_and_spend(other_user, agent=cheap_agent, title="Theirs", prompt=850, completion=0)
    run = send_and_spend(user, agent=cheap_agent, title="Mine", prompt=100, completion=0)

    assert budget_warning(user_id=user.pk) == ""
    # Their 85% less my run's 100 tokens would seem to cross 80% if theirs were mine.
    assert usage_warn_budgets_crossed(run_id=run.pk) == []


def test_the_warning_rounds_its_share_down(user, cheap_agent):
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    send_and_spend(user, agent=cheap_agent, title="Now", prompt=855, completion=0)

    reset = date_format(first_of_next_month(), "DATE_FORMAT")
    assert budget_warning(user_id=user.pk) == (
        f"You used 85% of this month's budget (855 of 1,000 tokens). It starts again on {reset}."
    )


def test_the_warning_names_each_limit_and_writes_money_as_money(user, dear_agent):
    UsageBudget.objects.create(
        user=user, monthly_tokens=1_000_000_000, monthly_amount=Decimal("1500")
    )
    # 500 million prompt tokens at 2.50 a million: half the tokens, 1,250.00 of 1,500.00.
    send_and_spend(user, agent=dear_agent, title="Now", prompt=500_000_000, completion=0)

    reset = date_format(first_of_next_month(), "DATE_FORMAT")
    assert budget_warning(user_id=user.pk) == (
        "You used 83% of this month's budget "
        "(500,000,000 of 1,000,000,000 tokens; 1,250.00 of 1,500.00 USD). "
        f"It starts again on {reset}."
    )


def test_a_run_stored_at_the_first_instant_of_the_month_counts_in_it(user, cheap_agent):
    budget = UsageBudget.objects.create(user=user, monthly_tokens=1000)
    send_and_spend(user, agent=cheap_agent, title="Earlier", prompt=700, completion=0)
    run = send_and_spend(user, agent=cheap_agent, title="At midnight", prompt=150, completion=0)
    UsageEntry.objects.filter(run_id=run.pk).update(created_at=month_start())

    assert usage_warn_budgets_crossed(run_id=run.pk) == [budget]


def test_a_run_is_judged_by_its_own_tokens_whatever_came_after_it(user, cheap_agent):
    budget = UsageBudget.objects.create(user=user, monthly_tokens=1000)
    send_and_spend(user, agent=cheap_agent, title="Earlier", prompt=700, completion=0)
    run = send_and_spend(user, agent=cheap_agent, title="This one", prompt=150, completion=0)
    send_and_spend(user, agent=cheap_agent, title="Later", prompt=10, completion=0)

    # Asked late (its drive ended after the next run's): 71% -> 86% with this run's 150.
    assert usage_warn_budgets_crossed(run_id=run.pk) == [budget]


def test_a_money_budget_crossed_by_a_runs_prompt_tokens_is_told(user, dear_agent):
    budget = UsageBudget.objects.create(user=user, monthly_amount=Decimal("10.00"))
    # 750,000 completion tokens at 10.00 a million: 7.50 (75%) before the run.
    send_and_spend(user, agent=dear_agent, title="Earlier", prompt=0, completion=750_000)
    # 400,000 prompt tokens at 2.50 a million: 1.00 more, 85%.
    run = send_and_spend(user, agent=dear_agent, title="Now", prompt=400_000, completion=0)

    assert usage_warn_budgets_crossed(run_id=run.pk) == [budget]


def test_a_budget_shows_what_was_used_this_month_the_fullest_first(
    user, cheap_agent, django_assert_num_queries
):
    own = UsageBudget.objects.create(user=user, monthly_tokens=1000)
    team = Group.objects.create(name="team")
    user.groups.add(team)
    shared = UsageBudget.objects.create(group=team, monthly_tokens=100)
    # Nothing used yet: nothing shown as used.
    assert [(s.budget, s.tokens_used, s.amount_used) for s in budget_states(user_id=user.pk)] == [
        (own, 0, Decimal(0)),
        (shared, 0, Decimal(0)),
    ]

    send_and_spend(user, agent=cheap_agent, title="Some", prompt=50, completion=0)

    # The group's budget is half used, the user's own a twentieth: the fuller comes first.
    states = budget_states(user_id=user.pk)
    assert [(s.budget, s.tokens_used) for s in states] == [(shared, 50), (own, 50)]
    # The budgets are read with their groups (the page names them), then one sum each.
    with django_assert_num_queries(3):
        assert [str(s.budget.group) for s in budget_states(user_id=user.pk)] == ["team", "None"]


def test_a_month_starts_on_its_first_day_at_midnight(user, cheap_agent, monkeypatch):
    zone = timezone.get_current_timezone()
    monkeypatch.setattr(timezone, "now", lambda: datetime.datetime(2026, 3, 15, 12, 0, tzinfo=zone))
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    first_day = send_and_spend(user, agent=cheap_agent, title="First", prompt=30, completion=0)
    last_month = send_and_spend(user, agent=cheap_agent, title="Before", prompt=5, completion=0)
    UsageEntry.objects.filter(run_id=first_day.pk).update(
        created_at=datetime.datetime(2026, 3, 1, 0, 0, tzinfo=zone)
    )
    UsageEntry.objects.filter(run_id=last_month.pk).update(
        created_at=datetime.datetime(2026, 2, 28, 23, 59, 59, tzinfo=zone)
    )

    [state] = budget_states(user_id=user.pk)

    assert (state.tokens_used, state.resets_on) == (30, datetime.date(2026, 4, 1))
