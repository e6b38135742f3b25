"""What was spent, read from the usage ledger (reads only): a user's own usage by day, agent
and conversation, and staff's by user, group, agent and model (docs/architecture.md, "Usage
and limits").

Every figure comes from ``UsageEntry`` rows: the tokens of a run or a summary and the prices
its endpoint had when the entry opened, so a price changed later leaves these figures as
they were, and a deleted conversation's runs still count. Money is ``Decimal`` throughout.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils.translation import gettext as _

from agents.models import Conversation, UsageEntry

_MILLION = Decimal(1_000_000)


class UsageBy(StrEnum):
    """What a usage table's rows are."""

    DAY = "day"
    AGENT = "agent"
    CONVERSATION = "conversation"
    USER = "user"
    GROUP = "group"
    MODEL = "model"


# The ledger column each grouping reads, and the one that names its rows.
_COLUMNS: dict[UsageBy, tuple[str, str | None]] = {
    UsageBy.DAY: ("day", None),
    UsageBy.AGENT: ("profile_id", "profile__name"),
    UsageBy.CONVERSATION: ("conversation_id", None),
    UsageBy.USER: ("user_id", "user__username"),
    UsageBy.GROUP: ("user__groups", "user__groups__name"),
    UsageBy.MODEL: ("model_config_id", "model_config__name"),
}


@dataclass(frozen=True)
class UsageLine:
    """One row of a usage table: ``key`` identifies it (a date, an id, or None for "none"),
    ``label`` names it for people."""

    key: Any
    label: str
    runs: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class UsageTotals:
    runs: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def usage_entries(
    *, since: datetime.datetime, until: datetime.datetime, user_id: int | None = None
) -> QuerySet[UsageEntry]:
    """Entries of runs and summaries started in ``[since, until)``; one user's only when
    ``user_id`` is given (a user's own page never reads anyone else's)."""
    entries = UsageEntry.objects.filter(created_at__gte=since, created_at__lt=until)
    if user_id is not None:
        entries = entries.filter(user_id=user_id)
    return entries


def usage_lines(*, entries: QuerySet[UsageEntry], by: UsageBy) -> list[UsageLine]:
    """The entries summed per ``by``: days newest first, the rest by cost then tokens, the
    largest first. By group, a user in two groups counts in each, and "No group" holds
    users in none."""
    key_column, label_column = _COLUMNS[by]
    if by is UsageBy.DAY:
        entries = entries.annotate(day=TruncDate("created_at"))
    names = [key_column] if label_column is None else [key_column, label_column]
    grouped = (
        entries.values(*names)
        .annotate(
            runs=Count("id", filter=Q(kind=UsageEntry.Kind.RUN)),
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
            cost_millionths=Sum(UsageEntry.cost_millionths()),
        )
        .order_by()
    )
    rows = list(grouped)
    titles = (
        _conversation_titles(row[key_column] for row in rows) if by is UsageBy.CONVERSATION else {}
    )
    lines = [
        UsageLine(
            key=row[key_column],
            label=_label(
                by, row[key_column], row.get(label_column) if label_column else None, titles
            ),
            runs=row["runs"],
            prompt_tokens=row["prompt"] or 0,
            completion_tokens=row["completion"] or 0,
            cost=(row["cost_millionths"] or Decimal(0)) / _MILLION,
        )
        for row in rows
    ]
    if by is UsageBy.DAY:
        lines.sort(key=lambda line: line.key, reverse=True)
    else:
        lines.sort(key=lambda line: line.label)
        lines.sort(key=lambda line: (line.cost, line.total_tokens), reverse=True)
    return lines


def usage_totals(*, entries: QuerySet[UsageEntry]) -> UsageTotals:
    """The entries summed, each entry once (whatever the table's grouping)."""
    totals = entries.aggregate(
        runs=Count("id", filter=Q(kind=UsageEntry.Kind.RUN)),
        prompt=Sum("prompt_tokens"),
        completion=Sum("completion_tokens"),
        cost_millionths=Sum(UsageEntry.cost_millionths()),
    )
    return UsageTotals(
        runs=totals["runs"] or 0,
        prompt_tokens=totals["prompt"] or 0,
        completion_tokens=totals["completion"] or 0,
        cost=(totals["cost_millionths"] or Decimal(0)) / _MILLION,
    )


def usage_days(
    lines: list[UsageLine], *, first: datetime.date, last: datetime.date
) -> list[UsageLine]:
    """Per-day lines for every day from ``first`` to ``last``, oldest first, a day with
    nothing as zeros: the chart's bars."""
    by_day = {line.key: line for line in lines}
    days = []
    day = first
    while day <= last:
        days.append(
            by_day.get(day)
            or UsageLine(
                key=day,
                label=day.isoformat(),
                runs=0,
                prompt_tokens=0,
                completion_tokens=0,
                cost=Decimal(0),
            )
        )
        day += datetime.timedelta(days=1)
    return days


def _conversation_titles(ids: Iterable[int | None]) -> dict[int, str]:
    wanted = [pk for pk in ids if pk is not None]
    return {
        pk: title or _("Untitled")
        for pk, title in Conversation.objects.filter(pk__in=wanted).values_list("pk", "title")
    }


def _label(by: UsageBy, key: Any, name: str | None, titles: dict[int, str]) -> str:
    if by is UsageBy.DAY:
        return str(key.isoformat())
    if by is UsageBy.CONVERSATION:
        if key is None:
            return _("No conversation")
        return titles.get(key, _("Deleted conversation"))
    if name:
        return name
    return {
        UsageBy.AGENT: _("No agent (summaries)"),
        UsageBy.USER: _("Unknown user"),
        UsageBy.GROUP: _("No group"),
        UsageBy.MODEL: _("Demo model or deleted endpoint"),
    }[by]
