"""What a send costs in this process, part by part: ``message_send`` as daphne calls it.

``bench/daphne_cost.py`` measures daphne as a whole; this script takes the send alone, with
nothing else running in the process, and times the parts of ``agents/services/
conversations.py`` it goes through (the sending thread's CPU time, nested parts included in
their callers; the total is the whole process's), the model inserts, and what the commit
sets off: Celery's publish of the run's task, and the hand-off of ``message.created`` to the
event publisher, whose thread publishes it. The runs it queues go to a queue no worker
reads and are ended at once. Run it from another tree (``cd /tmp/before &&
.venv/bin/python bench/send_cost.py``) to compare code; parts that do not exist there are
left out.

    .venv/bin/python bench/send_cost.py --sends 300
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from typing import Any

# As the benchmarks' daphne runs (live.production_env, run_vs_floor's pool): no send limit.
os.environ["CHAT_SENDS_PER_MINUTE"] = "0"
os.environ.setdefault("DATABASE_POOL_MAX_SIZE", "20")

import live
from django.conf import settings

from agents import events
from agents.models import AgentRun, Message
from agents.services import conversations
from agents.services.conversations import conversation_create, message_send
from agents.tasks import run_execute

PARTS = (
    "_lock_owned",
    "_read_under_lock",
    "_profile_for",
    "default_profile",
    "_check_profile_allowed",
    "_check_can_start_run",
    "_queue_run",
    "_queue_run_with_its_message",
    "prompt_version_current",
    "usage_reserve",
    "_enqueue_run",
    "event_append",
)
UNREAD_QUEUE = "bench-send-cost-unread"


def timed(spent: dict[str, float], name: str, func: Any) -> Any:
    # The calling thread's CPU: the event publisher's thread works at the same time (the
    # message.created it was handed), and its CPU belongs to the total, not to this part.
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.thread_time() - began

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    live.migrate()
    settings.CELERY_TASK_ROUTES = {"agents.run_execute": {"queue": UNREAD_QUEUE}}
    from chatsite.celery import app

    app.conf.task_routes = settings.CELERY_TASK_ROUTES
    spent: dict[str, float] = {}
    for name in PARTS:
        if hasattr(conversations, name):
            setattr(conversations, name, timed(spent, name, getattr(conversations, name)))
    for model in (Message, AgentRun):
        manager = model.objects
        manager.create = timed(spent, f"{model.__name__}.create", manager.create)  # type: ignore[method-assign]
    # What the commit sets off: the run's task to the broker, message.created to the sockets.
    run_execute.delay = timed(spent, "Celery's publish", run_execute.delay)
    events._Publisher.send = timed(spent, "the event's hand-off", events._Publisher.send)  # type: ignore[method-assign]

    user = live.make_user("sendcost")
    targets = [conversation_create(owner=user) for _ in range(args.warmup + args.sends)]
    try:
        for conversation in targets[: args.warmup]:
            message_send(conversation=conversation, user=user, content="go", client_id="1")
        spent.clear()
        began = time.process_time()
        for conversation in targets[args.warmup :]:
            message_send(conversation=conversation, user=user, content="go", client_id="1")
        total = (time.process_time() - began) * 1000 / args.sends
    finally:
        with app.connection_for_write() as broker:
            broker.default_channel.queue_purge(UNREAD_QUEUE)
        AgentRun.objects.filter(conversation__owner=user).update(status=AgentRun.Status.CANCELLED)
    print(f"a send, CPU ms, mean of {args.sends}: {total:.2f}")
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        print(f"  {name:28s} {seconds * 1000 / args.sends:.3f}")


if __name__ == "__main__":
    main()
