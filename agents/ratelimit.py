"""Per-user sliding-window rate limits, shared by every process (HTTP, sockets, workers).

A limit of N per window allows a hit when fewer than N of the user's earlier hits of the
same action fall in the last ``window_seconds`` — at any moment, not per clock minute, so
no burst can straddle a minute boundary. The hits are a Redis sorted set (the cache's
Redis, under its key prefix); counting and recording are one Lua script, so two processes
can never both take the last free slot.

Timestamps are ``timezone.now()`` of the calling process (the app's hosts share NTP time).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any, cast

from django.core.cache import cache
from django.utils import timezone

# Drops the hits that left the window, then records this hit if the window has room.
# Returns {1, 0} when allowed, {0, ms until the oldest hit leaves the window} when not.
_SLIDING_WINDOW = """
local now_ms = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms - window_ms)
if redis.call('ZCARD', KEYS[1]) >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(oldest[2]) + window_ms - now_ms}
end
redis.call('ZADD', KEYS[1], now_ms, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window_ms)
return {1, 0}
"""


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    # Seconds until a hit would be allowed again (0 when allowed).
    retry_after: float


def rate_limit_hit(
    *, action: str, user_id: int, limit: int, window_seconds: float = 60.0
) -> RateDecision:
    """Count one ``action`` by the user against ``limit`` per window; 0 means no limit.

    A refused hit is not recorded, so a client that keeps retrying is let in as soon as its
    oldest counted hit leaves the window.
    """
    if limit <= 0:
        return RateDecision(allowed=True, retry_after=0.0)
    key = cache.make_and_validate_key(f"ratelimit:{action}:{user_id}")
    client = cast(Any, cache)._cache.get_client(
        key, write=True
    )  # the cache's own Redis connection pool
    allowed, wait_ms = client.eval(
        _SLIDING_WINDOW,
        1,
        key,
        int(timezone.now().timestamp() * 1000),
        math.ceil(window_seconds * 1000),
        limit,
        uuid.uuid4().hex,
    )
    return RateDecision(allowed=bool(allowed), retry_after=max(int(wait_ms), 0) / 1000)
