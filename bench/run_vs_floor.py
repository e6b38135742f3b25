"""chatsite against the floor, interleaved in one invocation: CPU per run, process by process.

The floor (``../shared/floor/``, its own README) is a lean implementation of the same durable
run: the same model replies, the same writes per reply, the same fencing, the same numbered
frames to the socket. This script alternates blocks of the two on this machine, so both see
the same load: for each repeat, one block of chatsite rounds (``run_concurrency.measure``:
one celery worker and one daphne, kept up for the whole invocation) and one block of floor
rounds (``bench.py --repeats 1`` in its own virtualenv, which starts and warms its own
processes), the order swapped from one repeat to the next.

CPU per run, for both, from /proc before and after each round: the worker, the socket server
(daphne / the floor's ws server), PostgreSQL counted two ways (``pg_all``: every postgres
process and the postmaster's reaped children, whoever their clients are; ``pg_own``: this
database's backends and the server's background processes), and the Redis server. Medians
over the repeats, then the ratio chatsite / floor; under the table, the median of the ratios
taken repeat by repeat (``paired_ratios``).

Both systems take their model replies from the floor's ``model_server.py``: chatsite from
one such process started for the invocation, the floor from the one its ``bench.py`` starts
(``--model-server scripted``: chatsite's from ``agents/llm/scripted.py`` in this process, as
before 2026-11-26). Each round also says when the last send of the burst was
accepted (its ``message.created`` arrived) and, for chatsite, the longest run counted from
its own send's acceptance: the wall is at most the sum of the two (``bench/intake.py``
measures the intake alone). For chatsite it also reads every process's CPU at the burst and
at the last acceptance, and prints what the intake cost per run and how many cores it kept
busy. ``--daphnes K`` deals the sockets out among K daphne processes (the issue's figures
are for one).

    python3.11 -m venv .venv-floor   # then the floor README's pip line
    .venv/bin/python bench/run_vs_floor.py --runs 50,200 --repeats 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import live
import psutil
import run_concurrency
from django.db import connection
from floor_rows import LOADGEN, PROCESSES, median_row, paired_ratios, total

from agents.llm.scripted import ScriptedServer
from agents.models import AgentRun
from tests.processes import DaphneProcess

FLOOR_DIR = live.ROOT.parent / "shared" / "floor"


def postgres_cpu_all() -> float:
    """Every postgres process's CPU, plus what the postmaster's exited children used."""
    total = 0.0
    for proc in psutil.process_iter(["name", "ppid"]):
        if not (proc.info["name"] or "").startswith("postgres"):
            continue
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
        if proc.info["ppid"] == 1 or not _is_postgres(proc.info["ppid"]):
            total += times.children_user + times.children_system
    return total


def _is_postgres(pid: int) -> bool:
    try:
        return psutil.Process(pid).name().startswith("postgres")
    except psutil.Error:
        return False


def own_postgres_pids() -> list[int]:
    """This database's backends and the server's own background processes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE (datname = current_database() "
            "AND pid <> pg_backend_pid()) OR backend_type NOT IN "
            "('client backend', 'autovacuum worker', 'parallel worker')"
        )
        return [row[0] for row in cursor.fetchall()]


def redis_pid() -> int:
    for proc in psutil.process_iter(["name", "cmdline"]):
        if (proc.info["name"] or "").startswith("redis-server") and ":6379" in " ".join(
            proc.info["cmdline"] or []
        ):
            return proc.pid
    raise SystemExit("no redis-server on :6379")


def cpu(pid: int) -> float:
    try:
        return live.cpu_seconds(pid)
    except psutil.Error:
        return 0.0


class FloorModelServer:
    """The floor's own model server (``model_server.py``), in its own process: the same
    replies as ``live.stepping_policy``, in the same 8-character chunks, so both systems are
    measured against the same model server."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.pid = process.pid
        assert process.stdout is not None
        ready = process.stdout.readline().split()
        if ready[:1] != ["READY"]:
            raise SystemExit(f"the floor's model server did not start: {ready}")
        self.base_url = f"http://127.0.0.1:{int(ready[1])}/v1"


@contextlib.contextmanager
def floor_model_server(python: str, folder: Path, delay: float, tool_calls: int):
    process = subprocess.Popen(
        [python, "model_server.py", "--port", "0", "--delay", str(delay),
         "--tool-calls", str(tool_calls)],
        cwd=folder, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield FloorModelServer(process)
    finally:
        process.terminate()
        process.wait(timeout=10)


class Readings:
    """CPU seconds of chatsite's processes, read before and after a round."""

    def __init__(self, worker: int, daphnes: list[int], redis: int, model: int | None) -> None:
        self.pids = {
            "worker": [worker],
            "socket": daphnes,
            "redis": [redis],
            LOADGEN: [os.getpid()],
        }
        # The floor's model server, when chatsite uses it: load generator, as the floor's is.
        self.model = model

    def read(self, own: list[int]) -> dict[str, float]:
        reading = {name: sum(cpu(pid) for pid in pids) for name, pids in self.pids.items()}
        if self.model is not None:
            reading[LOADGEN] += cpu(self.model)
        reading["pg_all"] = postgres_cpu_all()
        reading["pg_own"] = sum(cpu(pid) for pid in own)
        return reading


def chatsite_round(
    n: int, worker, daphnes: list, profile, ideal: float, readings: Readings
) -> dict:
    clients = run_concurrency.prepare(n, daphnes, profile)
    own_before = own_postgres_pids()
    before = readings.read(own_before)
    # Peak RSS of each daphne: the first as "daphne", any others as "daphne2" and on.
    rss_pids = {f"daphne{i + 1 if i else ''}": d.pid for i, d in enumerate(daphnes)}
    # The CPU from the burst of sends to the last one's acceptance: what the intake cost,
    # every process together (pg_all: a backend opened meanwhile is not in ``own`` yet).
    at_burst: dict[str, float] = {}
    at_intake: dict[str, float] = {}
    with live.PeakRss(worker=worker.pid, **rss_pids) as rss:
        outcome = live.run_async(
            run_concurrency.round_of(
                clients,
                on_burst=lambda: at_burst.update(readings.read(own_before)),
                on_all_accepted=lambda: at_intake.update(readings.read(own_before)),
            )
        )
    # Backends that appeared during the round started from zero.
    own = sorted(set(own_before) | set(own_postgres_pids()))
    after = readings.read(own)
    after["pg_own"] = sum(cpu(pid) for pid in own)
    results = outcome["results"]
    wall = max(r["finished"] for r in results) - outcome["began"]
    latencies = [x for r in results for x in r["latencies"]]
    # A live run taken over by another claim (a heartbeat late past the stale limit): the
    # fencing makes it harmless, but it should not happen under load.
    conversation_ids = [int(url.rstrip("/").rsplit("/", 1)[-1]) for url, _ in clients]
    takeovers = AgentRun.objects.filter(
        conversation_id__in=conversation_ids, attempts__gt=1
    ).count()
    clean = sum(
        r["seqs"] == list(range(1, len(r["seqs"]) + 1)) and r["end"] == "run.finished"
        for r in results
    )
    for r in results:
        if r["seqs"] != list(range(1, len(r["seqs"]) + 1)) or r["end"] != "run.finished":
            print(f"   not clean: seqs {r['seqs']} end {r['end']} stalls {r['stalls']}")
    return {
        "n": n,
        "wall": wall,
        "efficiency": ideal / wall,
        # When the last send was accepted (its message.created arrived): how long the
        # system took to take all N sends, a part of the wall no run's work can overlap.
        "accepted": max(r["accepted"] for r in results) - outcome["began"],
        # The longest run from its send's acceptance to its end: the wall less the intake.
        "longest_run": max(r["finished"] - r["accepted"] for r in results),
        "p50": live.percentile(latencies, 50) * 1000,
        "p99": live.percentile(latencies, 99) * 1000,
        "clean": clean,
        "takeovers": takeovers,
        "cpu": {k: (after[k] - before.get(k, 0.0)) * 1000 / n for k in (*PROCESSES, LOADGEN)},
        "intake_cpu": {k: (at_intake[k] - at_burst[k]) * 1000 / n for k in (*PROCESSES, LOADGEN)},
        "rss": {k: v / 2**20 for k, v in rss.peak.items()},
    }


def floor_block(sizes: list[int], python: str, folder: Path, out: Path) -> list[dict]:
    """One block of floor rounds (its own processes, a warm-up round, then each N)."""
    before = out.read_text().count("\n") if out.exists() else 0
    subprocess.run(
        [python, "bench.py", "--runs", ",".join(map(str, sizes)), "--repeats", "1",
         "--variants", "plain:aiohttp", "--out", str(out), "--tag", "vs-chatsite"],
        cwd=folder, check=True, timeout=1800,
    )  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()[before:]]
    return [
        {
            "n": row["n"],
            "wall": row["wall"],
            "efficiency": row["efficiency"],
            "accepted": row["accepted"],
            "p50": row["p50"],
            "p99": row["p99"],
            "clean": row["clean"],
            "takeovers": 0,
            "cpu": {
                "worker": row["cpu_ms_per_run"]["worker"],
                "socket": row["cpu_ms_per_run"]["ws"],
                "pg_all": row["cpu_ms_per_run"]["pg_all"],
                "pg_own": row["cpu_ms_per_run"]["pg_own"],
                "redis": row["cpu_ms_per_run"]["redis"],
                LOADGEN: row["cpu_ms_per_run"].get("loadgen", 0.0)
                + row["cpu_ms_per_run"].get("model", 0.0),
            },
            "rss": {},
        }
        for row in rows
    ]


def report(sizes: list[int], rows: dict[str, list[dict]], label: str) -> None:
    print(f"\n### {label}: medians of {len(rows['chatsite']) // len(sizes)} repeats\n")
    print("| system | N | wall s | all sends accepted s | efficiency | step p50 / p99 ms | "
          "CPU ms per run: worker / "
          "socket / pg own (pg all) / redis | total | load generator | "
          "peak RSS worker / daphne MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        medians = {}
        for system in ("chatsite", "floor"):
            of_n = [r for r in rows[system] if r["n"] == n]
            if not of_n:
                continue
            m = medians[system] = median_row(of_n)
            c = m["cpu"]
            rss = " / ".join(f"{v:.0f}" for v in m["rss"].values()) or "-"
            print(
                f"| {system} | {n} | {m['wall']:.2f} | {m['accepted']:.2f} | "
                f"{m['efficiency']:.3f} | "
                f"{m['p50']:.0f} / {m['p99']:.0f} | {c['worker']:.1f} / {c['socket']:.1f} / "
                f"{c['pg_own']:.1f} ({c['pg_all']:.1f}) / {c['redis']:.1f} | "
                f"{total(c):.1f} | {c[LOADGEN]:.1f} | {rss} |"
            )
        if len(medians) == 2:
            ours, floor = medians["chatsite"]["cpu"], medians["floor"]["cpu"]
            ratios = " / ".join(
                f"{ours[k] / floor[k]:.1f}" if floor[k] else "-"
                for k in ("worker", "socket", "pg_own", "redis")
            )
            print(f"| ratio | {n} | | | | | {ratios} | {total(ours) / total(floor):.2f} | | |")
    for n in sizes:
        paired = paired_ratios(rows, n)
        if paired:
            print(
                f"\nN = {n}, each repeat's chatsite round against the floor's of the same "
                f"repeat: ratio {statistics.median(paired):.2f} at the median "
                f"({min(paired):.2f} to {max(paired):.2f}, {len(paired)} pairs)"
            )


def report_intake(sizes: list[int], rows: list[dict]) -> None:
    """chatsite's CPU from the burst to the last send's acceptance, and how many of the
    machine's cores it kept busy (the load generator included: it shares them)."""
    med = statistics.median
    for n in sizes:
        of_n = [r for r in rows if r["n"] == n]
        if not of_n:
            continue
        cpu_ms = {k: med(r["intake_cpu"][k] for r in of_n) for k in (*PROCESSES, LOADGEN)}
        busy = med(
            sum(r["intake_cpu"][k] for k in ("worker", "socket", "pg_all", "redis", LOADGEN))
            * n
            / 1000
            / r["accepted"]
            for r in of_n
        )
        print(
            f"\nN = {n}, chatsite's intake (the burst to the last send accepted, "
            f"{med(r['accepted'] for r in of_n):.2f} s): CPU ms per run worker "
            f"{cpu_ms['worker']:.1f} / daphne {cpu_ms['socket']:.1f} / pg all "
            f"{cpu_ms['pg_all']:.1f} / redis {cpu_ms['redis']:.1f} (load generator "
            f"{cpu_ms[LOADGEN]:.1f}); cores busy {busy:.2f} of {os.cpu_count()}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="50,200")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--tool-calls", type=int, default=4)
    parser.add_argument("--pool", default="20", help="DATABASE_POOL_MAX_SIZE for chatsite")
    parser.add_argument("--floor-python", default=str(live.ROOT / ".venv-floor" / "bin" / "python"))
    parser.add_argument("--floor-dir", default=str(FLOOR_DIR), help="the floor's folder")
    parser.add_argument("--label", default=os.environ.get("BENCH_LABEL", "chatsite vs floor"))
    parser.add_argument("--out", default="", help="append every round as JSON lines here")
    parser.add_argument("--skip-floor", action="store_true", help="chatsite rounds only")
    parser.add_argument(
        "--model-server",
        choices=("floor", "scripted"),
        default="floor",
        help="chatsite's model: the floor's model_server.py in its own process (the floor's "
        "rounds use it too), or agents/llm/scripted.py's server in this process",
    )
    parser.add_argument(
        "--daphnes",
        type=int,
        default=1,
        help="daphne processes for chatsite, the sockets dealt out among them in turn (the "
        "issue's figures are for one); their CPU is added up as the socket server's",
    )
    parser.add_argument(
        "--worker-concurrency",
        type=int,
        default=20,
        help="the worker's -c (threads): docs/deploy.md's recommended command by default; "
        "a run's task hands the run to the loop and returns, so -c does not cap runs",
    )
    args = parser.parse_args()
    if not Path(args.floor_python).exists():
        raise SystemExit(
            f"no floor virtualenv at {args.floor_python}: see {args.floor_dir}/README.md"
        )
    sizes = [int(n) for n in args.runs.split(",")]
    live.migrate()
    ideal = (args.tool_calls + 1) * args.delay
    floor_out = Path(tempfile.mkdtemp(prefix="floor-")) / "runs.jsonl"
    rows: dict[str, list[dict]] = {"chatsite": [], "floor": []}

    with contextlib.ExitStack() as stack:
        # The scripted server's address is also the processes' default endpoint (unused).
        model_server = stack.enter_context(ScriptedServer())
        model = f"bench-floor-{int(time.time())}"
        model_server.policy(model, live.stepping_policy(args.tool_calls, args.delay))
        floor_model = None
        if args.model_server == "floor":
            floor_model = stack.enter_context(
                floor_model_server(
                    args.floor_python, Path(args.floor_dir), args.delay, args.tool_calls
                )
            )
        profile = live.make_profile(floor_model or model_server, model)
        worker, daphne = stack.enter_context(
            live.stack(
                model_server,
                concurrency=args.worker_concurrency,
                DATABASE_POOL_MAX_SIZE=args.pool,
            )
        )
        daphnes = [daphne]
        for _ in range(args.daphnes - 1):
            more = DaphneProcess(
                live.production_env(model_server, DATABASE_POOL_MAX_SIZE=args.pool)
            )
            more.start()
            stack.callback(more.stop)
            daphnes.append(more)
        readings = Readings(
            worker.pid,
            [d.pid for d in daphnes],
            redis_pid(),
            floor_model.pid if floor_model else None,
        )
        chatsite_round(5 * len(daphnes), worker, daphnes, profile, ideal, readings)  # warm-up
        for repeat in range(args.repeats):
            order = ("chatsite", "floor") if repeat % 2 == 0 else ("floor", "chatsite")
            for system in order:
                if system == "floor" and args.skip_floor:
                    continue
                if system == "floor":
                    got = floor_block(sizes, args.floor_python, Path(args.floor_dir), floor_out)
                else:
                    got = [
                        chatsite_round(n, worker, daphnes, profile, ideal, readings) for n in sizes
                    ]
                for row in got:
                    c = row["cpu"]
                    print(
                        f"{system:8} rep {repeat} N={row['n']:3} wall {row['wall']:.2f} "
                        f"eff {row['efficiency']:.3f} accepted {row['accepted']:.2f} "
                        f"longest run {row.get('longest_run', float('nan')):.2f} "
                        f"p50/p99 {row['p50']:.0f}/"
                        f"{row['p99']:.0f} clean {row['clean']}/{row['n']} takeovers "
                        f"{row['takeovers']} CPU ms/run "
                        + " ".join(f"{k} {c[k]:.1f}" for k in (*PROCESSES, LOADGEN)),
                        flush=True,
                    )
                    if args.out:
                        with open(args.out, "a") as out:
                            out.write(json.dumps({"system": system, **row}) + "\n")
                rows[system].extend(got)
    report(sizes, rows, args.label)
    report_intake(sizes, rows["chatsite"])
    sys.stdout.flush()


if __name__ == "__main__":
    main()
