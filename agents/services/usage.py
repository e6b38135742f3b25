"""Token usage and cost per user and day, for the admin's usage page.

A selector (it only reads), kept beside the services because only the admin uses it.
Cost comes from each run's model endpoint prices per million tokens; a run without an
endpoint (the offline demo model) costs nothing.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate

from agents.models import AgentRun

_MILLION = Decimal(1_000_000)


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


def usage_by_user_day(*, since: datetime.datetime, until: datetime.datetime) -> list[UsageRow]:
    """Runs created in ``[since, until)``, summed per conversation owner and day.

    Rows come newest day first, then by username.
    """
    grouped = (
        AgentRun.objects.filter(created_at__gte=since, created_at__lt=until)
        .annotate(day=TruncDate("created_at"))
        .values(
            "day",
            "conversation__owner_id",
            "conversation__owner__username",
            "model_config__prompt_price_per_million",
            "model_config__completion_price_per_million",
        )
        .annotate(
            runs=Count("id"),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
        )
        .order_by()
    )
    # One row per (user, day, price pair) from the database; prices differ per endpoint, so
    # cost is computed per group here and the groups are merged per (user, day).
    totals: dict[tuple[int, datetime.date], dict[str, Any]] = defaultdict(
        lambda: {"runs": 0, "prompt": 0, "completion": 0, "cost": Decimal(0), "username": ""}
    )
    for group in grouped:
        key = (group["conversation__owner_id"], group["day"])
        entry = totals[key]
        prompt = group["prompt_tokens"] or 0
        completion = group["completion_tokens"] or 0
        prompt_price = group["model_config__prompt_price_per_million"] or Decimal(0)
        completion_price = group["model_config__completion_price_per_million"] or Decimal(0)
        entry["username"] = group["conversation__owner__username"]
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
