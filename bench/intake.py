"""A burst of sends with no run starting: how long one daphne takes to accept N sends sent at
once, and what each costs it and PostgreSQL.

``bench/run_vs_floor.py`` reports, for every round, when the last send of the burst was
accepted (its ``message.created`` arrived) and the longest run counted from its own send's
acceptance. This script measures the intake alone: the worker stops taking tasks
(Celery's ``cancel_consumer``) while the sends arrive, so nothing but the sends runs; the CPU
of daphne (user and system) and of this database's backends is read just before the burst
and as soon as the last ``message.created`` has arrived. Then the worker takes tasks again
and every run is waited for, so a round leaves nothing queued.

    .venv/bin/python bench/intake.py --sends 200 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import live
import psutil
import run_concurrency
import run_vs_floor

from agents.llm.scripted import ScriptedServer


async def _burst(clients: list[tuple[str, str]], origin: str, daphne, worker) -> dict:
    sockets = [await live.open_socket(url, cookie, origin) for url, cookie in clients]
    backends = await asyncio.to_thread(run_vs_floor.own_postgres_pids)
    before = psutil.Process(daphne.pid).cpu_times()
    postgres_before = sum(run_vs_floor.cpu(pid) for pid in backends)
    began = time.monotonic()
    for ws in sockets:
        await ws.send(json.dumps({"type": "message.send", "content": "go", "client_id": "1"}))
    accepted = await asyncio.gather(*(_accepted(ws) for ws in sockets))
    after = psutil.Process(daphne.pid).cpu_times()
    # Backends that appeared during the burst started from zero.
    backends = sorted(set(backends) | set(await asyncio.to_thread(run_vs_floor.own_postgres_pids)))
    postgres_after = sum(run_vs_floor.cpu(pid) for pid in backends)
    worker.resume()
    ended = await asyncio.gather(*(_ended(ws) for ws in sockets))
    for ws in sockets:
        await ws.close()
    n = len(sockets)
    return {
        "intake": max(accepted) - began,
        "p50": statistics.median(accepted) - began,
        "user": (after.user - before.user) * 1000 / n,
        "system": (after.system - before.system) * 1000 / n,
        "postgres": (postgres_after - postgres_before) * 1000 / n,
        "finished": sum(kind == "run.finished" for kind in ended),
    }


async def _accepted(ws) -> float:
    """When the send's ``message.created`` arrived; a refused send ends the benchmark."""
    while True:
        frame = json.loads(await ws.recv())
        if frame.get("type") == "error":
            raise SystemExit(f"a send was refused: {frame}")
        if frame.get("type") == "message.created":
            return time.monotonic()


async def _ended(ws) -> str:
    """How the socket's run ended."""
    while True:
        frame = json.loads(await ws.recv())
        if frame.get("type") in ("run.finished", "run.failed", "run.cancelled"):
            return frame["type"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    live.migrate()
    with ScriptedServer() as model_server:
        model = f"bench-intake-{int(time.time())}"
        model_server.policy(model, live.stepping_policy(0, 0.0))
        profile = live.make_profile(model_server, model)
        processes = live.stack(
            model_server, concurrency=args.sends + 10, DATABASE_POOL_MAX_SIZE="20"
        )
        with processes as (worker, daphne):
            # A first burst loads what the first send of a process loads (not measured).
            worker.pause()
            warm = run_concurrency.prepare(5, daphne, profile)
            live.run_async(_burst(warm, daphne.url, daphne, worker))
            print("| round | all accepted s | half accepted s | daphne CPU ms per send: user / "
                  "system | PostgreSQL ms per send | runs finished |")  # fmt: skip
            print("|---|---|---|---|---|---|")
            rows = []
            for repeat in range(args.repeats):
                clients = run_concurrency.prepare(args.sends, daphne, profile)
                worker.pause()
                row = live.run_async(_burst(clients, daphne.url, daphne, worker))
                rows.append(row)
                print(
                    f"| {repeat + 1} | {row['intake']:.2f} | {row['p50']:.2f} | "
                    f"{row['user']:.2f} / {row['system']:.2f} | {row['postgres']:.2f} | "
                    f"{row['finished']}/{args.sends} |",
                    flush=True,
                )
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            print(
                f"| median | {med['intake']:.2f} | {med['p50']:.2f} | {med['user']:.2f} / "
                f"{med['system']:.2f} | {med['postgres']:.2f} | |"
            )


if __name__ == "__main__":
    main()
