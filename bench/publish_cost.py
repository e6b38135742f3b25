"""What queueing a run costs the process that sends it: Celery's ``run_execute.delay`` (what a
send calls after its commit) against a plain ``LPUSH`` of the same message,
in alternating rounds (CPU time). The tasks go to a queue no worker reads, emptied at the end.

    .venv/bin/python bench/publish_cost.py --calls 500 --rounds 6
"""

from __future__ import annotations

import argparse
import functools

import live
import redis
from django.conf import settings

from agents.tasks import run_execute
from chatsite.celery import app

UNREAD_QUEUE = "bench-publish-cost-unread"
RAW_KEY = "bench-publish-cost-raw"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    app.conf.task_routes = {"agents.run_execute": {"queue": UNREAD_QUEUE}}
    raw = redis.Redis.from_url(settings.REDIS_URL)
    with app.connection_for_write() as broker:
        broker.default_channel.client.delete(UNREAD_QUEUE)
        run_execute.delay(1)
        message = broker.default_channel.client.lpop(UNREAD_QUEUE)
    print(f"a queued run's message: {len(message)} bytes in Redis")

    calls = {
        "run_execute.delay": lambda: run_execute.delay(1),
        "LPUSH": lambda: raw.lpush(RAW_KEY, message),
    }
    rounds = {
        name: functools.partial(live.cpu_ms_per_call, call, args.calls, warmup=50)
        for name, call in calls.items()
    }
    try:
        spent = live.alternating_rounds(rounds, args.rounds)
    finally:
        with app.connection_for_write() as broker:
            broker.default_channel.queue_purge(UNREAD_QUEUE)
        raw.delete(RAW_KEY)
    live.print_medians(f"CPU ms per call, {args.calls} calls a round:", spent)


if __name__ == "__main__":
    main()
