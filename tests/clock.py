"""A pinned wall clock for tests of time windows: ``minute_turn_clock`` starts 0.5 s before
a minute turns, so a test that sends across the turn cannot pass or fail by the time of day.

It replaces ``django.utils.timezone.now``, which the rate limiter (agents/ratelimit.py) and
the rows' timestamps read; ``advance`` moves it on.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone


class PinnedClock:
    def __init__(self, start: datetime) -> None:
        self.current = start

    def __call__(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


@pytest.fixture
def minute_turn_clock(monkeypatch) -> PinnedClock:
    next_minute = math.floor(time.time() / 60 + 1) * 60
    clock = PinnedClock(datetime.fromtimestamp(next_minute - 0.5, tz=UTC))
    monkeypatch.setattr(timezone, "now", clock)
    return clock
