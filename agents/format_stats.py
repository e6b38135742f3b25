"""How well each model keeps to the ReAct format: parse errors per run, per model (staff-wide).

Read from the stored ``step`` events, the run's log: an ``error`` step with code
``parse_error`` is one reply the engine could not read, and a ``mode_switch`` step is a run
that went on in native tool-calling mode after too many of them. Staff use the figures to
choose a model's mode (ReAct or native tool calling); the admin shows them.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.db.models import Count, Q

from agents.models import AgentRun
from agents.protocol import FrameType


@dataclass(frozen=True)
class FormatRow:
    model_name: str
    runs: int
    runs_with_parse_errors: int
    parse_errors: int
    mode_switches: int

    @property
    def parse_errors_per_run(self) -> float:
        return self.parse_errors / self.runs if self.runs else 0.0


def parse_errors_by_model(*, since: datetime.datetime, until: datetime.datetime) -> list[FormatRow]:
    """One row per model name for the runs created in ``[since, until)``, most errors first."""
    parse_error = Q(
        events__type=FrameType.STEP,
        events__payload__kind="error",
        events__payload__code="parse_error",
    )
    switch = Q(events__type=FrameType.STEP, events__payload__kind="mode_switch")
    rows = (
        AgentRun.objects.filter(created_at__gte=since, created_at__lt=until)
        .values("model_name")
        .annotate(
            runs=Count("id", distinct=True),
            runs_with_parse_errors=Count("id", distinct=True, filter=parse_error),
            parse_errors=Count("events", filter=parse_error),
            mode_switches=Count("events", filter=switch),
        )
        .order_by("-parse_errors", "model_name")
    )
    return [FormatRow(**row) for row in rows]
