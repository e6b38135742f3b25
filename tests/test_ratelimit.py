"""agents/ratelimit.py on its own: a sliding window per user and action, in Redis, that says
how long to wait when it refuses."""

from __future__ import annotations

import uuid

import pytest

from agents.ratelimit import RateDecision, rate_limit_hit
from tests.clock import minute_turn_clock  # noqa: F401  (a fixture)


@pytest.fixture
def action() -> str:
    """An action no other test counts hits of, so that runs never share a window."""
    return f"test-{uuid.uuid4().hex[:12]}"


def test_the_limit_allows_that_many_hits_then_says_when_to_retry(action, minute_turn_clock):  # noqa: F811
    hits = []
    for _ in range(3):
        hits.append(rate_limit_hit(action=action, user_id=1, limit=3, window_seconds=10))
        minute_turn_clock.advance(1.5)

    refused = rate_limit_hit(action=action, user_id=1, limit=3, window_seconds=10)

    assert hits == [RateDecision(allowed=True, retry_after=0.0)] * 3
    # The first hit was 4.5 s ago: it leaves the 10 s window in 5.5 s.
    assert refused == RateDecision(allowed=False, retry_after=5.5)


def test_a_refused_hit_is_not_counted(action, minute_turn_clock):  # noqa: F811
    assert rate_limit_hit(action=action, user_id=1, limit=1, window_seconds=2).allowed
    for _ in range(5):
        minute_turn_clock.advance(0.25)
        assert not rate_limit_hit(action=action, user_id=1, limit=1, window_seconds=2).allowed

    minute_turn_clock.advance(0.76)  # the one counted hit is 2.01 s old

    assert rate_limit_hit(action=action, user_id=1, limit=1, window_seconds=2).allowed


def test_the_window_counts_the_last_window_seconds_to_the_millisecond(action, minute_turn_clock):  # noqa: F811
    assert rate_limit_hit(action=action, user_id=1, limit=1, window_seconds=0.5).allowed
    minute_turn_clock.advance(0.499)
    refused = rate_limit_hit(action=action, user_id=1, limit=1, window_seconds=0.5)
    assert (refused.allowed, refused.retry_after) == (False, 0.001)

    minute_turn_clock.advance(0.001)

    assert rate_limit_hit(action=action, user_id=1, limit=1, window_seconds=0.5).allowed


def test_users_and_actions_have_windows_of_their_own(action, minute_turn_clock):  # noqa: F811
    assert rate_limit_hit(action=action, user_id=1, limit=1).allowed
    assert not rate_limit_hit(action=action, user_id=1, limit=1).allowed

    assert rate_limit_hit(action=action, user_id=2, limit=1).allowed
    assert rate_limit_hit(action=f"{action}-other", user_id=1, limit=1).allowed


def test_the_default_window_is_a_minute(action, minute_turn_clock):  # noqa: F811
    assert rate_limit_hit(action=action, user_id=1, limit=1).allowed
    minute_turn_clock.advance(59.9)
    assert rate_limit_hit(action=action, user_id=1, limit=1) == RateDecision(False, 0.1)
    minute_turn_clock.advance(0.1)
    assert rate_limit_hit(action=action, user_id=1, limit=1).allowed


@pytest.mark.parametrize("limit", [0, -1])
def test_no_limit_allows_every_hit_and_records_none(action, limit, minute_turn_clock):  # noqa: F811
    for _ in range(5):
        assert rate_limit_hit(action=action, user_id=1, limit=limit) == RateDecision(True, 0.0)

    # Nothing was counted: a limit set afterwards starts from an empty window.
    assert rate_limit_hit(action=action, user_id=1, limit=1).allowed
