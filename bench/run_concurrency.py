"""Concurrent runs through the real stack: efficiency, step delivery latency and peak RSS.

For each N, N users' sockets are connected to one daphne, then each sends one message at the
same moment. One celery worker (threads pool) runs them against the scripted model, which
answers every call after ``--delay`` seconds: ``--tool-calls`` calculator actions, then the
final answer, so a run needs ``tool_calls + 1`` model calls and ideally takes
``(tool_calls + 1) * delay`` seconds however many run at once.

- efficiency = ideal wall time / measured wall time (first send to the last ``run.finished``
  received by its socket);
- step delivery latency = the time a ``step`` frame reaches its socket minus its ``ts`` (the
  event row's ``created_at``, stamped in the worker just before its transaction commits;
  same machine, same clock);
- peak RSS of the worker and of daphne, sampled every 100 ms during the N runs;
- every socket's frames are checked: seq 1..k with no gap or repeat, ending in
  ``run.finished``.

    .venv/bin/python bench/run_concurrency.py --runs 1,10,50,200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlsplit

import live

from agents.llm.scripted import ScriptedServer
from agents.services.conversations import conversation_create

STALL_SECONDS = 20.0


async def one_client(
    url: str,
    cookie: str,
    origin: str,
    start: asyncio.Event,
    results: list,
    on_accepted: Callable[[], None] = lambda: None,
):
    async with await live.open_socket(url, cookie, origin) as ws:
        await start.wait()
        await ws.send(json.dumps({"type": "message.send", "content": "go", "client_id": "1"}))
        seqs, latencies, stalls, accepted = [], [], 0, 0.0
        while True:
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=STALL_SECONDS)
            except TimeoutError:
                # Nothing for a long while: ask for what was missed, as the browser does on
                # reconnecting, and count it. A stall means a live frame never arrived.
                stalls += 1
                await ws.send(json.dumps({"type": "resume", "after_seq": max(seqs, default=0)}))
                continue
            frame = json.loads(raw)
            received = time.time()
            if "seq" not in frame:
                continue
            if frame["seq"] in seqs:
                continue  # a resume resends from after_seq; the browser drops repeats too
            seqs.append(frame["seq"])
            if frame["type"] == "message.created":
                accepted = time.monotonic()
                on_accepted()
            if frame["type"] == "step":
                latencies.append(received - datetime.fromisoformat(frame["ts"]).timestamp())
            if frame["type"] in ("run.finished", "run.failed", "run.cancelled"):
                results.append(
                    {
                        "seqs": seqs,
                        "latencies": latencies,
                        "end": frame["type"],
                        "stalls": stalls,
                        "accepted": accepted,
                        "finished": time.monotonic(),
                    }
                )
                return


def prepare(n: int, daphne, profile) -> list[tuple[str, str]]:
    """N users, each with a conversation: (socket URL, session cookie). ``daphne`` may be a
    list of daphne processes: the sockets are then dealt out among them in turn."""
    daphnes = daphne if isinstance(daphne, list) else [daphne]
    clients = []
    for i in range(n):
        user = live.make_user("bench")
        conversation = conversation_create(owner=user, profile=profile)
        url = daphnes[i % len(daphnes)].ws_url(f"/ws/conversations/{conversation.pk}/")
        clients.append((url, live.session_cookie(user)))
    return clients


def page_origin(url: str) -> str:
    """The origin of the page that would open this socket: the same host and port."""
    return "http://" + urlsplit(url).netloc


async def round_of(
    clients: list[tuple[str, str]],
    on_burst: Callable[[], None] = lambda: None,
    on_all_accepted: Callable[[], None] = lambda: None,
) -> dict:
    """Every client connects, then all send at once. ``on_burst`` is called just before the
    sends, ``on_all_accepted`` as the last send's ``message.created`` arrives (the end of
    the intake), both on this loop."""
    start = asyncio.Event()
    results: list[dict] = []
    waiting = len(clients)

    def accepted() -> None:
        nonlocal waiting
        waiting -= 1
        if waiting == 0:
            on_all_accepted()

    tasks = [
        asyncio.create_task(one_client(url, cookie, page_origin(url), start, results, accepted))
        for url, cookie in clients
    ]
    await asyncio.sleep(2.0 + len(clients) / 20)  # let every socket connect before the sends
    on_burst()
    began = time.monotonic()
    start.set()
    await asyncio.gather(*tasks)
    return {"began": began, "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="1,10,50,200", help="comma-separated N values")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per model call")
    parser.add_argument("--tool-calls", type=int, default=4)
    parser.add_argument(
        "--pool", default="0,20", help="DATABASE_POOL_MAX_SIZE values to compare (0: no pool)"
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.runs.split(",")]
    live.migrate()
    ideal = (args.tool_calls + 1) * args.delay

    with ScriptedServer() as model_server:
        model = f"bench-concurrency-{int(time.time())}"
        model_server.policy(model, live.stepping_policy(args.tool_calls, args.delay))
        profile = live.make_profile(model_server, model)
        print(f"ideal wall time per round: {ideal:.1f} s")
        print("| pool | N | wall s | all sends accepted s | efficiency "
              "| step latency p50 / p95 / p99 ms | peak RSS worker / daphne MB "
              "| sockets clean | stalls | CPU ms per run worker / daphne |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|---|")
        for pool in args.pool.split(","):
            with live.stack(
                model_server, concurrency=max(sizes) + 10, DATABASE_POOL_MAX_SIZE=pool
            ) as (worker, daphne):
                for n in sizes:
                    print(measure(n, pool, worker, daphne, profile, ideal), flush=True)


def measure(n: int, pool: str, worker, daphne, profile, ideal: float) -> str:
    clients = prepare(n, daphne, profile)
    cpu_before = live.cpu_seconds(worker.pid), live.cpu_seconds(daphne.pid)
    others_before = live.service_cpu_seconds()
    with live.PeakRss(worker=worker.pid, daphne=daphne.pid) as rss:
        outcome = live.run_async(round_of(clients))
    cpu = [
        (live.cpu_seconds(pid) - before) * 1000 / n
        for pid, before in zip((worker.pid, daphne.pid), cpu_before, strict=True)
    ]
    others = {k: (v - others_before[k]) * 1000 / n for k, v in live.service_cpu_seconds().items()}
    print("   other CPU ms per run:", {k: round(v) for k, v in others.items()}, flush=True)
    results = outcome["results"]
    wall = max(r["finished"] for r in results) - outcome["began"]
    # How long daphne took to accept every send (message.created back on its socket).
    accepted = max(r["accepted"] for r in results) - outcome["began"]
    latencies = [x for r in results for x in r["latencies"]]
    clean = sum(
        r["seqs"] == list(range(1, len(r["seqs"]) + 1)) and r["end"] == "run.finished"
        for r in results
    )
    p = [live.percentile(latencies, q) * 1000 for q in (50, 95, 99)]
    stalls = sum(r["stalls"] for r in results)
    return (
        f"| {pool} | {n} | {wall:.2f} | {accepted:.2f} | {ideal / wall:.3f} | "
        f"{p[0]:.1f} / {p[1]:.1f} / {p[2]:.1f} | "
        f"{rss.peak['worker'] / 2**20:.0f} / {rss.peak['daphne'] / 2**20:.0f} | "
        f"{clean}/{n} | {stalls} | {cpu[0]:.0f} / {cpu[1]:.0f} |"
    )


if __name__ == "__main__":
    main()
