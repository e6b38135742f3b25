"""The usage ledger: what every run and summary used, the daily token quota, monthly
budgets, and the admin's usage page per user and day (docs/architecture.md, "Usage and
limits").

Each run and each summarising task gets a ``UsageEntry`` when it starts, with its
endpoint's prices of that moment: its cost is its tokens at those prices, whatever the
prices become. Deleting a conversation deletes its runs but not their entries, so used
tokens stay used.

**Monthly budgets** (``UsageBudget``) are checked with the daily quota in
``usage_check_quota`` (and by ``usage_reserve_again`` and a summary's ``usage_reserve``),
from the ledger since the first of the month; they reserve nothing.

**Reservation.** A run or summary cannot know what it will use, so when it starts it
reserves ``min(CHAT_QUOTA_RESERVATION_TOKENS, what is left of the quota)``, checked and
written under a lock on the user's row: parallel sends queue there, and each sees the ones
before it. While it goes, it holds ``reserved - used so far`` (never below 0) on top of
what it used. The tokens of every model call are added to the entry in the transaction
that stores the call, so the real count settles the reservation: a run's ends when the run
ends in any way (or disappears with its conversation), a summary's when its task ends.
Left for today = quota - tokens used since local midnight - reservations still held; a
start is refused with ``quota_exceeded`` when nothing is left. A run that started is never
stopped for the quota, so a user can overshoot by what one start used beyond its
reservation.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, OuterRef, Q, Sum, Value
from django.db.models.functions import Greatest, TruncDate
from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.translation import gettext as _

from agents import events
from agents.models import AgentRun, Conversation, ModelConfig, UsageBudget, UsageEntry
from agents.protocol import RefusalCode, RequestRefused

# A summary's reservation lapses after this long even if its task never reported back (its
# worker died); the tokens it recorded stay counted.
SUMMARY_RESERVATION_SECONDS = 900

_MILLION = Decimal(1_000_000)
_CENTS = Decimal("0.01")
_TOKENS = F("prompt_tokens") + F("completion_tokens")


@dataclass(frozen=True)
class UsageRow:
    user_id: int
    username: str
    day: datetime.date
    runs: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class QuotaExceeded(Exception):
    """Nothing is left of the user's daily token quota."""


@dataclass(frozen=True)
class BudgetState:
    """What a monthly budget's members have used of it this month, priced as each entry
    was when it opened (``UsageEntry.prompt_price_per_million``...)."""

    budget: UsageBudget
    tokens_used: int
    amount_used: Decimal
    resets_on: datetime.date

    @property
    def share_used(self) -> float:
        """The larger of tokens and money used, as a share of its limit."""
        shares = []
        if self.budget.monthly_tokens:
            shares.append(self.tokens_used / self.budget.monthly_tokens)
        if self.budget.monthly_amount:
            shares.append(float(self.amount_used / self.budget.monthly_amount))
        return max(shares, default=0.0)

    @property
    def reached(self) -> bool:
        return self.share_used >= 1

    @property
    def warns(self) -> bool:
        return self.share_used >= UsageBudget.WARN_AT


class BudgetReached(QuotaExceeded):
    """A monthly budget the user is under (their own or a group's) is used up."""

    def __init__(self, state: BudgetState) -> None:
        super().__init__(state)
        self.state = state


def usage_refusal(exceeded: QuotaExceeded, *, during_pause: bool = False) -> RequestRefused:
    """The one refusal of a start over the daily quota or a monthly budget, for every door
    (a send, an edit, a regenerate, /compact, Continue and a decision on a paused call)."""
    if isinstance(exceeded, BudgetReached):
        return RequestRefused(RefusalCode.MONTHLY_BUDGET_REACHED, budget_message(exceeded.state))
    if during_pause:
        return RequestRefused(
            RefusalCode.QUOTA_EXCEEDED,
            _("You have used today's token allowance: stop the run, or go on tomorrow."),
        )
    return RequestRefused(RefusalCode.QUOTA_EXCEEDED, _("You have used today's token allowance."))


def budget_message(state: BudgetState) -> str:
    """What the chat says of a budget at its warning share or used up, with the day it
    starts again."""
    budget = state.budget
    resets_on = date_format(state.resets_on, "DATE_FORMAT")
    if budget.group_id is not None:
        whose = _("Your group %(group)s") % {"group": budget.group}
    else:
        whose = _("You")
    if state.reached:
        return _(
            "%(whose)s used this month's budget (%(used)s). You can send again on %(date)s."
        ) % {"whose": whose, "used": budget_used_text(state), "date": resets_on}
    return _(
        "%(whose)s used %(percent)s%% of this month's budget (%(used)s). It starts again "
        "on %(date)s."
    ) % {
        "whose": whose,
        "percent": min(int(state.share_used * 100), 99),
        "used": budget_used_text(state),
        "date": resets_on,
    }


def budget_used_text(state: BudgetState) -> str:
    """``12,000 of 20,000 tokens; 1.20 of 5.00 USD``: each limit the budget has."""
    budget = state.budget
    parts = []
    if budget.monthly_tokens:
        parts.append(
            _("%(used)s of %(limit)s tokens")
            % {
                "used": number_format(state.tokens_used, force_grouping=True),
                "limit": number_format(budget.monthly_tokens, force_grouping=True),
            }
        )
    if budget.monthly_amount:
        parts.append(
            _("%(used)s of %(limit)s %(currency)s")
            % {
                "used": number_format(state.amount_used.quantize(_CENTS), 2, force_grouping=True),
                "limit": number_format(budget.monthly_amount, 2, force_grouping=True),
                "currency": settings.CHAT_CURRENCY,
            }
        )
    return "; ".join(parts)


def month_start(today: datetime.date | None = None) -> datetime.datetime:
    """Midnight of the first of this month in the site's time zone, when budgets start."""
    today = today or timezone.localdate()
    return timezone.make_aware(datetime.datetime.combine(today.replace(day=1), datetime.time.min))


def next_month_start(today: datetime.date | None = None) -> datetime.date:
    today = today or timezone.localdate()
    return (today.replace(day=1) + datetime.timedelta(days=32)).replace(day=1)


def budget_states(*, user_id: int) -> list[BudgetState]:
    """Every monthly budget the user is under (their own, their groups'), with what its
    members used this month; the fullest first."""
    budgets = (
        UsageBudget.objects.filter(Q(user_id=user_id) | Q(group__user=user_id))
        .select_related("group")
        .distinct()
    )
    states = [budget_state(budget) for budget in budgets]
    states.sort(key=lambda state: state.share_used, reverse=True)
    return states


def budget_state(budget: UsageBudget) -> BudgetState:
    """What ``budget``'s members used this month: its user, or its group's members now
    (their entries from before they joined included)."""
    entries = UsageEntry.objects.filter(created_at__gte=month_start())
    if budget.user_id is not None:
        entries = entries.filter(user_id=budget.user_id)
    else:
        entries = entries.filter(user__groups=budget.group_id)
    totals = entries.aggregate(tokens=Sum(_TOKENS), amount=Sum(UsageEntry.cost_millionths()))
    return BudgetState(
        budget=budget,
        tokens_used=totals["tokens"] or 0,
        amount_used=(totals["amount"] or Decimal(0)) / _MILLION,
        resets_on=next_month_start(),
    )


def budget_warning(*, user_id: int) -> str:
    """The chat's notice when a budget is at its warning share or used up; else empty."""
    states = budget_states(user_id=user_id)
    if not states or not states[0].warns:
        return ""
    return budget_message(states[0])


def usage_warn_budgets_crossed(*, run_id: int) -> list[UsageBudget]:
    """After a run's drive: the monthly budgets its tokens took to their warning share
    (``UsageBudget.WARN_AT``) or used up, each told to the open pages of everyone it covers
    (its user, or its group's members), after commit. A budget already past that mark
    before the run is not told again; the page shows it from when it loads. Returns them."""
    entry = (
        UsageEntry.objects.filter(run_id=run_id, kind=UsageEntry.Kind.RUN)
        .only(
            "user_id",
            "created_at",
            "prompt_tokens",
            "completion_tokens",
            "prompt_price_per_million",
            "completion_price_per_million",
        )
        .first()
    )
    if entry is None or entry.created_at < month_start():
        return []
    tokens = entry.prompt_tokens + entry.completion_tokens
    if not tokens:
        return []
    cost = (
        entry.prompt_tokens * entry.prompt_price_per_million
        + entry.completion_tokens * entry.completion_price_per_million
    ) / _MILLION
    crossed = []
    for state in budget_states(user_id=entry.user_id):
        before = dataclasses.replace(
            state, tokens_used=state.tokens_used - tokens, amount_used=state.amount_used - cost
        )
        if (state.warns and not before.warns) or (state.reached and not before.reached):
            crossed.append(state.budget)
    if crossed:
        events.publish_budget_warning_on_commit(sorted(_covered_users(crossed)))
    return crossed


def _covered_users(budgets: list[UsageBudget]) -> set[int]:
    """Who a budget counts: its user, or its group's members now."""
    users = {budget.user_id for budget in budgets if budget.user_id is not None}
    groups = [budget.group_id for budget in budgets if budget.group_id is not None]
    if groups:
        members = get_user_model().objects.filter(groups__in=groups).values_list("pk", flat=True)
        users.update(members)
    return users


def _check_budgets(user_id: int) -> None:
    """``BudgetReached`` when a monthly budget the user is under is used up. Not under a
    lock, and nothing is reserved: a run already going is never stopped for a budget, so
    a month can overshoot by what the runs in progress use (as the daily quota can)."""
    for state in budget_states(user_id=user_id):
        if state.reached:
            raise BudgetReached(state)


def _local_midnight() -> datetime.datetime:
    return timezone.make_aware(datetime.datetime.combine(timezone.localdate(), datetime.time.min))


def _holding() -> Q:
    """Entries whose reservation still counts: a run queued or running, a summary going."""
    run_going = Exists(
        AgentRun.objects.filter(pk=OuterRef("run_id")).exclude(
            status__in=AgentRun.TERMINAL_STATUSES
        )
    )
    summary_going = Q(
        kind=UsageEntry.Kind.SUMMARY,
        settled_at__isnull=True,
        created_at__gte=timezone.now() - datetime.timedelta(seconds=SUMMARY_RESERVATION_SECONDS),
    )
    return Q(kind=UsageEntry.Kind.RUN) & Q(run_going) | summary_going


def tokens_used_today(*, user_id: int) -> int:
    """Prompt + completion tokens of the user's runs and summaries started since midnight."""
    totals = UsageEntry.objects.filter(
        user_id=user_id, created_at__gte=_local_midnight()
    ).aggregate(used=Sum(F("prompt_tokens") + F("completion_tokens")))
    return totals["used"] or 0


def quota_left_today(*, user_id: int) -> int | None:
    """Tokens left of today's quota after use and held reservations; None without a quota."""
    quota = settings.CHAT_DAILY_TOKEN_QUOTA
    if not quota:
        return None
    held: int = (
        UsageEntry.objects.filter(user_id=user_id, created_at__gte=_local_midnight())
        .filter(_holding())
        .aggregate(
            held=Sum(
                Greatest(
                    F("reserved_tokens") - F("prompt_tokens") - F("completion_tokens"), Value(0)
                )
            )
        )["held"]
        or 0
    )
    return int(quota - tokens_used_today(user_id=user_id) - held)


def usage_check_quota(*, user_id: int, budgeted: bool = True) -> None:
    """Raise ``QuotaExceeded`` if nothing is left today, ``BudgetReached`` if a monthly
    budget is used up (reads only; takes no lock). Every start a person asks for is checked
    here first. ``budgeted=False``: the caller already read that no budget applies to the
    user (a send reads it with the conversation, agents/db/statements.py)."""
    left = quota_left_today(user_id=user_id)
    if left is not None and left <= 0:
        raise QuotaExceeded
    if budgeted:
        _check_budgets(user_id)


def usage_reserve(
    *,
    user_id: int,
    kind: str,
    run: AgentRun | None = None,
    conversation_id: int | None = None,
    model_config_id: int | None = None,
) -> UsageEntry:
    """Open the ledger entry of a starting run or summary, reserving its share of the quota.

    Must run inside the transaction that starts the work: with a quota, the user's row
    stays locked until it commits, so parallel starts are checked one after another.
    Raises ``QuotaExceeded`` (and writes nothing) when nothing is left today. A start
    without a run (a summary: nobody pressed anything) checks the monthly budgets here too;
    a run's were checked by ``usage_check_quota`` when it was asked for.
    """
    if run is None:
        _check_budgets(user_id)
    endpoint = run.model_config if run is not None else _endpoint(model_config_id)
    return UsageEntry.objects.create(
        user_id=user_id,
        kind=kind,
        run_id=run.pk if run is not None else None,
        conversation_id=run.conversation_id if run is not None else conversation_id,
        model_config=endpoint,
        profile_id=_profile_id(run),
        reserved_tokens=_reservation(user_id),
        **_prices(endpoint),
    )


def usage_entry_reserving(*, user_id: int, run: AgentRun) -> UsageEntry:
    """``usage_reserve`` of a run's entry up to the write: the quota checked and held as
    there, the entry left for a caller that writes it with the run itself, in the same
    transaction (a send, ``agents/services/conversations.py``), its ``run_id`` then."""
    return UsageEntry(
        user_id=user_id,
        kind=UsageEntry.Kind.RUN,
        conversation_id=run.conversation_id,
        model_config_id=run.model_config_id,
        profile_id=_profile_id(run),
        reserved_tokens=_reservation(user_id),
        **_prices(run.model_config),
    )


def _endpoint(model_config_id: int | None) -> ModelConfig | None:
    if model_config_id is None:
        return None
    return ModelConfig.objects.filter(pk=model_config_id).first()


def _prices(endpoint: ModelConfig | None) -> dict[str, Decimal]:
    """The endpoint's prices as they are now, frozen on the entry that opens: a run is
    priced as it was when it was sent (docs/architecture.md, "Usage and limits")."""
    if endpoint is None:
        return {"prompt_price_per_million": Decimal(0), "completion_price_per_million": Decimal(0)}
    return {
        "prompt_price_per_million": endpoint.prompt_price_per_million,
        "completion_price_per_million": endpoint.completion_price_per_million,
    }


def _profile_id(run: AgentRun | None) -> int | None:
    version = run.profile_version if run is not None and run.profile_version_id else None
    return version.profile_id if version is not None else None


def _reservation(user_id: int) -> int:
    """The tokens a starting run or summary holds of today's quota (0 without one),
    checked under the user's row lock; ``QuotaExceeded`` when nothing is left."""
    if not settings.CHAT_DAILY_TOKEN_QUOTA:
        return 0  # the lock only orders the checks of a quota: nothing to check
    user_model = get_user_model()
    list(user_model.objects.select_for_update().filter(pk=user_id).values_list("pk"))
    left = quota_left_today(user_id=user_id)
    if left is not None and left <= 0:
        raise QuotaExceeded
    return 0 if left is None else min(left, settings.CHAT_QUOTA_RESERVATION_TOKENS)


def usage_reserve_again(*, user_id: int, run: AgentRun) -> None:
    """A paused run its owner resumes (Continue, a decision on a call) starts its model
    again, so it counts like a send: ``QuotaExceeded`` when nothing is left today, else its
    entry holds a fresh share on top of what it used. Inside the transaction that resumes
    it; the user's row stays locked until that commits, as for a start. A monthly budget
    used up refuses it too (``BudgetReached``)."""
    _check_budgets(user_id)
    if not settings.CHAT_DAILY_TOKEN_QUOTA:
        return
    user_model = get_user_model()
    list(user_model.objects.select_for_update().filter(pk=user_id).values_list("pk"))
    entry = UsageEntry.objects.filter(run_id=run.pk).first()
    own_hold = 0
    if entry is not None:
        used = entry.prompt_tokens + entry.completion_tokens
        own_hold = max(entry.reserved_tokens - used, 0)
    left = quota_left_today(user_id=user_id)
    if left is None:
        return
    # What the run already holds is its own: it counts as left for it.
    left += own_hold
    if left <= 0:
        raise QuotaExceeded
    share = min(left, settings.CHAT_QUOTA_RESERVATION_TOKENS)
    UsageEntry.objects.filter(run_id=run.pk).update(
        reserved_tokens=F("prompt_tokens") + F("completion_tokens") + share
    )


def usage_record_run_tokens(*, run: AgentRun, prompt_tokens: int, completion_tokens: int) -> None:
    """Add a run's model call to its ledger entry (in the transaction storing the call).

    A run queued before the ledger existed gets its entry here.
    """
    added = UsageEntry.objects.filter(run_id=run.pk).update(
        prompt_tokens=F("prompt_tokens") + prompt_tokens,
        completion_tokens=F("completion_tokens") + completion_tokens,
    )
    if added:
        return
    owner_id = (
        Conversation.objects.filter(pk=run.conversation_id)
        .values_list("owner_id", flat=True)
        .first()
    )
    if owner_id is None:
        return  # deleted with its conversation before its first call was stored
    UsageEntry.objects.create(
        user_id=owner_id,
        kind=UsageEntry.Kind.RUN,
        run_id=run.pk,
        conversation_id=run.conversation_id,
        model_config_id=run.model_config_id,
        profile_id=_profile_id(run),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        created_at=run.created_at or timezone.now(),
        **_prices(run.model_config),
    )


def usage_record_tokens(*, entry: UsageEntry, prompt_tokens: int, completion_tokens: int) -> None:
    UsageEntry.objects.filter(pk=entry.pk).update(
        prompt_tokens=F("prompt_tokens") + prompt_tokens,
        completion_tokens=F("completion_tokens") + completion_tokens,
    )


def usage_settle(*, entry: UsageEntry) -> None:
    """A summary ended: its reservation no longer counts, its recorded tokens do."""
    UsageEntry.objects.filter(pk=entry.pk, settled_at__isnull=True).update(
        settled_at=timezone.now()
    )


# --------------------------------------------------------------------------------------
# The admin's usage page (a selector: reads only)
# --------------------------------------------------------------------------------------


def usage_by_user_day(*, since: datetime.datetime, until: datetime.datetime) -> list[UsageRow]:
    """Runs and summaries started in ``[since, until)``, summed per user and day from the
    ledger (conversations deleted since still count). Rows come newest day first, then by
    username; ``runs`` counts runs only, the tokens include summaries.
    """
    grouped = (
        UsageEntry.objects.filter(created_at__gte=since, created_at__lt=until)
        .annotate(day=TruncDate("created_at"))
        .values(
            "day",
            "user_id",
            "user__username",
            "prompt_price_per_million",
            "completion_price_per_million",
        )
        .annotate(
            runs=Count("id", filter=Q(kind=UsageEntry.Kind.RUN)),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
        )
        .order_by()
    )
    # One row per (user, day, price pair) from the database; each entry keeps the prices of
    # its endpoint when it opened, so cost is computed per group here and the groups are
    # merged per (user, day).
    totals: dict[tuple[int, datetime.date], dict[str, Any]] = defaultdict(
        lambda: {"runs": 0, "prompt": 0, "completion": 0, "cost": Decimal(0), "username": ""}
    )
    for group in grouped:
        key = (group["user_id"], group["day"])
        entry = totals[key]
        prompt = group["prompt_tokens"] or 0
        completion = group["completion_tokens"] or 0
        prompt_price = group["prompt_price_per_million"]
        completion_price = group["completion_price_per_million"]
        entry["username"] = group["user__username"]
        entry["runs"] += group["runs"]
        entry["prompt"] += prompt
        entry["completion"] += completion
        entry["cost"] += (prompt * prompt_price + completion * completion_price) / _MILLION
    rows = [
        UsageRow(
            user_id=user_id,
            username=entry["username"],
            day=day,
            runs=entry["runs"],
            prompt_tokens=entry["prompt"],
            completion_tokens=entry["completion"],
            cost=entry["cost"].quantize(Decimal("0.000001")),
        )
        for (user_id, day), entry in totals.items()
    ]
    rows.sort(key=lambda row: row.username)
    rows.sort(key=lambda row: row.day, reverse=True)
    return rows
