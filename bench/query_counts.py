"""Queries and time per page load, API call and stored step, small history vs large.

The sizes of issue 7: a user with ``--conversations`` conversations (10,000) and a
conversation with ``--messages`` messages (2,000, each turn with a run and two events). Rows
are made with ``bulk_create`` in your own database (``DATABASE_URL``, default chatsite_ops)
and deleted at the end. Each figure is the query count and the median wall time of
``--repeat`` requests through Django's test client (no network), measured at the small size
and again at the large size, in one run. ``tests/perf/`` pins the counts in the test suite.

    .venv/bin/python bench/query_counts.py --conversations 10000 --messages 2000
"""

from __future__ import annotations

import argparse
import statistics
import time

import live
from django.db import connection
from django.test import Client, override_settings

from agents.react.types import ThoughtStep
from agents.runs.store import run_claim, run_record_step
from agents.services.conversations import conversation_create, message_send
from tests.perf.history import add_conversations, add_turns

PLAIN_STATIC = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


def measure(action, repeat: int) -> tuple[int, float]:
    # Counted by an execute wrapper: the request closes its connection at the end
    # (CONN_MAX_AGE=0), which the query log does not survive.
    executed: list[str] = []

    def count(execute, sql, params, many, context):
        executed.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        action()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return len(executed), statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    live.migrate()

    user = live.make_user("queries")
    try:
        conversation = conversation_create(owner=user, title="long")
        run = message_send(conversation=conversation, user=user, content="go").run
        run = run_claim(run_id=run.pk, worker_id="bench")
        client = Client()
        client.force_login(user)

        def ok(path: str):
            def get() -> None:
                response = client.get(path)
                assert response.status_code == 200, (path, response.status_code)

            return get

        probes = {
            "chat page (/c/<id>/)": ok(f"/c/{conversation.pk}/"),
            "API conversation list": ok("/api/conversations/"),
            "API list with ?q=": ok("/api/conversations/?q=history"),
            "API conversation detail": ok(f"/api/conversations/{conversation.pk}/"),
            "store one step": lambda: run_record_step(run=run, step=ThoughtStep(text="x")),
        }
        rows = {}
        with override_settings(
            SECURE_SSL_REDIRECT=False, STORAGES=PLAIN_STATIC, ALLOWED_HOSTS=["testserver"]
        ):
            add_conversations(user, 10)
            add_turns(conversation, 10, words_per_message=40)
            for name, probe in probes.items():
                rows[name] = [measure(probe, args.repeat)]
            add_conversations(user, args.conversations - 10)
            add_turns(conversation, args.messages // 2 - 10, words_per_message=40)
            for name, probe in probes.items():
                rows[name].append(measure(probe, args.repeat))

        print(f"| what | queries (small) | queries ({args.conversations} conversations, "
              f"{args.messages} messages) | median ms small | median ms large |")  # fmt: skip
        print("|---|---|---|---|---|")
        for name, ((q1, t1), (q2, t2)) in rows.items():
            print(f"| {name} | {q1} | {q2} | {t1:.1f} | {t2:.1f} |")
    finally:
        user.delete()


if __name__ == "__main__":
    main()
