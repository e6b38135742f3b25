"""CPU per run of each thread of the worker and daphne, under ``run_vs_floor.py``'s load.

Runs ``bench/run_vs_floor.py --skip-floor`` with ``bench/thread_probe`` on the processes'
``PYTHONPATH``, reads every thread's CPU clock after the first measured round and again
after the last (so start-up and warm-up are left out), and prints each group of threads
(named as the code names them, their number stripped) in ms per run.

    .venv/bin/python bench/thread_cpu.py --runs 200 --repeats 3
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

BENCH = Path(__file__).resolve().parent


def _find(pattern: str, parent: int) -> int:
    for _ in range(600):
        for proc in psutil.Process(parent).children(recursive=True):
            if pattern in " ".join(proc.cmdline()):
                return proc.pid
        time.sleep(0.2)
    raise SystemExit(f"no {pattern} process started")


def _snapshot(pid: int) -> dict[str, tuple[str, float]]:
    path = Path(f"/tmp/thread-cpu.{pid}")
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    for _ in range(100):
        if path.exists():
            break
        time.sleep(0.05)
    rows = (line.split("|") for line in path.read_text().splitlines())
    return {tid: (name, float(seconds)) for tid, name, seconds in rows}


def _report(title: str, before: dict, after: dict, runs: int) -> None:
    spent: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[str] = collections.Counter()
    for tid, (name, seconds) in after.items():
        if tid == "process":
            continue
        group = re.sub(r"[-_]?\d+$", "", name)
        spent[group] += seconds - before.get(tid, (name, 0.0))[1]
        counts[group] += 1
    process = after["process"][1] - before["process"][1]
    print(f"\n{title}: {process * 1000 / runs:.2f} ms per run (threads that ended are in this)")
    print("| threads | how many | CPU ms per run | share |")
    print("|---|---|---|---|")
    for group, seconds in spent.most_common():
        share = seconds / process if process else 0.0
        print(f"| {group} | {counts[group]} | {seconds * 1000 / runs:.2f} | {share:.0%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.repeats < 2:
        raise SystemExit("--repeats must be at least 2: the first round is left out")
    env = {**os.environ, "PYTHONPATH": str(BENCH / "thread_probe")}
    command = [
        sys.executable, str(BENCH / "run_vs_floor.py"), "--skip-floor",
        "--runs", str(args.runs), "--repeats", str(args.repeats), "--label", "threads",
    ]  # fmt: skip
    bench = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    worker = _find("celery", bench.pid)
    daphne = _find("daphne", bench.pid)
    assert bench.stdout is not None
    before: dict = {}
    after: dict = {}
    for line in bench.stdout:
        sys.stdout.write(line)
        if f"rep 0 N={args.runs}" in line:
            before = {"worker": _snapshot(worker), "daphne": _snapshot(daphne)}
        elif f"rep {args.repeats - 1} N={args.runs}" in line:
            after = {"worker": _snapshot(worker), "daphne": _snapshot(daphne)}
    bench.wait()
    runs = args.runs * (args.repeats - 1)
    for process in ("worker", "daphne"):
        _report(process, before[process], after[process], runs)


if __name__ == "__main__":
    main()
