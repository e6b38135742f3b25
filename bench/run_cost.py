"""What one send and one run cost the processes that handle them: CPU and SQL statements.

The load benchmarks (``run_concurrency.py``) are bounded by how much CPU a run takes in the
worker and a send takes in daphne, but they measure it under a noisy load. This script
measures the same code paths one at a time, with nothing else in this process:

- a send: ``message_send``, as daphne's consumer calls it (the run is enqueued to a queue no
  worker reads, so it stays for the next step);
- a run: ``run_execute_to_end`` (the task's ``run_execute`` hands the run to the process
  loop and returns; this waits for the drive's end), against the scripted model in a
  process of its own (``python -m agents.llm.serve``), so this process's CPU time is the
  worker's share only. Publishing to Redis (its own thread) is included.

Each run is the one ``run_concurrency.py`` uses: ``--tool-calls`` calculator actions, then
the answer. Medians over ``--runs`` runs after ``--warmup`` runs.

    .venv/bin/python bench/run_cost.py --runs 40
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import live
from django.db import connection
from django.db.backends import utils as backend_utils
from django.db.backends.base import base as backend_base

from agents.services.conversations import conversation_create, message_send
from agents.services.execution import run_execute_to_end
from chatsite.server.db import loop_pool

ACTION = live.ACTION
FINAL = live.FINAL


@contextmanager
def statements_in_every_thread() -> Iterator[list[str]]:
    """The SQL of every thread while inside, with the BEGIN, COMMIT and ROLLBACK Django logs:
    a run's writes are made on the worker's database threads and its event loop's own
    connections (``chatsite/server/db/loop_pool.py``), not the task's own thread."""
    seen: list[str] = []
    execute = backend_utils.CursorWrapper._execute_with_wrappers
    transaction_control = backend_base.debug_transaction
    loop_fetch_all = loop_pool.fetch_all

    async def recording_fetch_all(sql, params):
        seen.append(sql)
        return await loop_fetch_all(sql, params)

    def recording_execute(self, sql, params, many, executor):
        seen.append(sql)
        return execute(self, sql, params, many, executor)

    @contextmanager
    def recording_transaction_control(connection, sql):
        seen.append(sql)
        with transaction_control(connection, sql):
            yield

    backend_utils.CursorWrapper._execute_with_wrappers = recording_execute
    backend_base.debug_transaction = recording_transaction_control
    loop_pool.fetch_all = recording_fetch_all
    try:
        yield seen
    finally:
        backend_utils.CursorWrapper._execute_with_wrappers = execute
        backend_base.debug_transaction = transaction_control
        loop_pool.fetch_all = loop_fetch_all


def start_model_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents.llm.serve", "--port", "0"],
        cwd=live.ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    return proc, line.rsplit(" ", 1)[-1].strip()


def script(base_url: str, model: str, tool_calls: int) -> None:
    root = base_url.removesuffix("/v1")
    replies = [{"text": ACTION.format(n=n)} for n in range(tool_calls)]
    replies.append({"text": FINAL.format(n=tool_calls)})
    body = json.dumps({"model": model, "responses": replies}).encode()
    request = urllib.request.Request(
        f"{root}/_control/script", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


class _Server:
    """Just what ``live.make_profile`` reads of a ``ScriptedServer``."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--tool-calls", type=int, default=4)
    parser.add_argument("--profile", action="store_true", help="cProfile the measured runs")
    parser.add_argument("--profile-filter", default="", help="a regex for the profile's rows")
    parser.add_argument("--show-sql", action="store_true", help="print the counted statements")
    args = parser.parse_args()
    live.migrate()
    from django.conf import settings

    # The run is executed here, in this process: keep the enqueued task away from any worker.
    settings.CELERY_TASK_ROUTES = {"agents.run_execute": {"queue": "bench-run-cost-unread"}}
    from chatsite.celery import app

    app.conf.task_routes = settings.CELERY_TASK_ROUTES

    proc, base_url = start_model_server()
    try:
        model = f"bench-cost-{int(time.time())}"
        profile = live.make_profile(_Server(base_url), model)
        send_cpu, run_cpu = [], []
        send_queries = run_queries = 0
        profiler = cProfile.Profile(time.process_time) if args.profile else None
        for index in range(args.warmup + args.runs):
            script(base_url, model, args.tool_calls)
            user = live.make_user("cost")
            conversation = conversation_create(owner=user, profile=profile)
            measured = index >= args.warmup
            # Statements are counted in the last warm-up round: recording them costs CPU.
            counting = index == args.warmup - 1

            with statements_in_every_thread() if counting else nullcontext() as sent:
                began = time.process_time()
                result = message_send(
                    conversation=conversation, user=user, content="go", client_id="1"
                )
                send_ms = (time.process_time() - began) * 1000
            connection.close()

            with statements_in_every_thread() if counting else nullcontext() as ran:
                if profiler and measured:
                    profiler.enable()
                began = time.process_time()
                run_execute_to_end(run_id=result.run.pk)
                run_ms = (time.process_time() - began) * 1000
                if profiler and measured:
                    profiler.disable()
            result.run.refresh_from_db()
            if result.run.status != "succeeded":
                raise SystemExit(f"run {result.run.pk} ended {result.run.status}")
            if counting:
                send_queries, run_queries = len(sent), len(ran)
                if args.show_sql:
                    for label, captured in (("send", sent), ("run", ran)):
                        for sql in captured:
                            print(f"{label}: {sql[:160]}")
            if measured:
                send_cpu.append(send_ms)
                run_cpu.append(run_ms)
    finally:
        proc.terminate()
        proc.wait(10)
        with app.connection_for_write() as broker:
            broker.default_channel.queue_purge("bench-run-cost-unread")

    median = statistics.median
    print(f"runs: {args.runs} (+{args.warmup} warm-up), {args.tool_calls} tool calls each")
    print("| what | CPU ms median | CPU ms p10-p90 | statements |")
    print("|---|---|---|---|")
    rows = (("a send", send_cpu, send_queries), ("a run", run_cpu, run_queries))
    for name, cpu, queries in rows:
        deciles = statistics.quantiles(cpu, n=10)
        print(f"| {name} | {median(cpu):.1f} | {deciles[0]:.1f}-{deciles[-1]:.1f} | {queries} |")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile_filter or 60)


if __name__ == "__main__":
    main()
