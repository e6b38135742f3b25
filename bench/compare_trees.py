"""Two trees of chatsite on the run path, each against the floor, alternated in one invocation:
did a change make a run dearer or cheaper, beside the machine's own drift?

    .venv/bin/python bench/compare_trees.py --base <commit> [--head <commit>] [--invocations 3] \\
        [-- <bench/run_vs_floor.py's options, default --runs 200 --repeats 3>]

Each tree runs its own ``bench/run_vs_floor.py`` (so its own defaults, the worker's command
among them), with this virtualenv's Python and the floor's. ``--base`` is checked out with
``git worktree`` in a scratch folder, as is ``--head`` if given; without it the head is this
checkout as it is, uncommitted changes included. The invocations alternate (base, head, head,
base, base, head, ...), so a drift of the machine falls on both trees. Each gets a new
PostgreSQL database beside ``DATABASE_URL``'s (dropped after it), and the Redis database
``--redis-db`` on ``REDIS_URL``'s server is emptied before it: keys a run leaves (its rescue
marker, its queue) would otherwise meet a new database's runs of the same ids.

Printed: each invocation's medians as ``run_vs_floor.py`` computes them (``floor_rows.py``),
then per tree the median over its invocations of chatsite's CPU per run process by process,
the floor's, the ratio, the ratio paired repeat by repeat, and efficiency; and head over base.
Compare the ratios and efficiencies rather than raw CPU: the floor's own CPU moves between
invocations, and each ratio is taken against the floor rounds of the same invocation.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
from floor_rows import median_row, paired_ratios, total
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("worker", "socket", "pg_own", "redis")


@dataclass
class Invocation:
    tree: str
    efficiency: float
    floor_efficiency: float
    cpu: dict[str, float]  # chatsite's medians, ms per run
    floor_cpu: dict[str, float]
    paired: float

    @property
    def ratio(self) -> float:
        return total(self.cpu) / total(self.floor_cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--head", default="", help="a commit (default: this checkout as it is)")
    parser.add_argument("--invocations", type=int, default=3, help="of each tree")
    parser.add_argument("--redis-db", type=int, default=10, help="emptied before each invocation")
    parser.add_argument(
        "--floor-dir", default=str(ROOT.parent / "shared" / "floor"), help="the floor's folder"
    )
    parser.add_argument("bench_args", nargs="*", help="after --: run_vs_floor.py's options")
    args = parser.parse_args()
    bench_args = args.bench_args or ["--runs", "200", "--repeats", "3"]
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        raise SystemExit(
            "DATABASE_URL must name a PostgreSQL server: each invocation gets a new database there"
        )
    floor_python = ROOT / ".venv-floor" / "bin" / "python"
    if not floor_python.exists():
        raise SystemExit(f"no floor virtualenv at {floor_python}: see {args.floor_dir}/README.md")

    with contextlib.ExitStack() as stack:
        trees = {
            "base": stack.enter_context(worktree(args.base)),
            "head": stack.enter_context(worktree(args.head)) if args.head else ROOT,
        }
        order = [
            ("base", "head") if i % 2 == 0 else ("head", "base") for i in range(args.invocations)
        ]
        done: list[Invocation] = []
        for number, name in enumerate(name for pair in order for name in pair):
            tree = trees[name]
            print(f"\n## invocation {number + 1}: {name} ({describe(tree)})", flush=True)
            rounds = measure(tree, number, database_url, args, bench_args, floor_python)
            done.append(summarise(name, rounds))
            show(done[-1])
    report(done)


@contextlib.contextmanager
def worktree(commit: str) -> Iterator[Path]:
    """``commit`` checked out beside this one, sharing its virtualenvs; removed after."""
    with tempfile.TemporaryDirectory(prefix="compare-") as scratch:
        folder = Path(scratch) / "tree"
        git("worktree", "add", "--detach", str(folder), commit)
        try:
            for venv in (".venv", ".venv-floor"):
                (folder / venv).symlink_to(ROOT / venv)
            yield folder
        finally:
            git("worktree", "remove", "--force", str(folder))


def git(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def describe(tree: Path) -> str:
    dirty = git("status", "--porcelain", "--untracked-files=no", cwd=tree)
    return git("log", "-1", "--format=%h %s", cwd=tree) + (
        " + uncommitted changes" if dirty else ""
    )


def measure(
    tree: Path,
    number: int,
    database_url: str,
    args: argparse.Namespace,
    bench_args: list[str],
    floor_python: Path,
) -> list[dict]:
    """One ``run_vs_floor.py`` in ``tree`` on a database of its own: its rounds."""
    name = f"{urlsplit(database_url).path.lstrip('/') or 'chatsite'}_compare_{os.getpid()}_{number}"
    redis_url = urlunsplit(
        urlsplit(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))._replace(
            path=f"/{args.redis_db}"
        )
    )
    redis.Redis.from_url(redis_url).flushdb()
    with database(database_url, name) as url, tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "rounds.jsonl"
        env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_url}
        subprocess.run(
            [
                sys.executable,
                str(tree / "bench" / "run_vs_floor.py"),
                *bench_args,
                "--floor-python",
                str(floor_python),
                "--floor-dir",
                args.floor_dir,
                "--out",
                str(out),
            ],
            cwd=tree,
            env=env,
            check=True,
        )
        return [json.loads(line) for line in out.read_text().splitlines()]


@contextlib.contextmanager
def database(server_url: str, name: str) -> Iterator[str]:
    """A new database on ``server_url``'s server, dropped afterwards: its URL."""
    parts = urlsplit(server_url)
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(maintenance, autocommit=True) as admin:
        admin.execute(drop)  # left by a killed invocation whose process id this one reuses
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(maintenance, autocommit=True) as admin:
            admin.execute(drop)


def summarise(tree: str, rounds: list[dict]) -> Invocation:
    """The invocation's largest N, as ``run_vs_floor.py`` reports it."""
    n = max(r["n"] for r in rounds)
    rows = {
        system: [r for r in rounds if r["system"] == system and r["n"] == n]
        for system in ("chatsite", "floor")
    }
    if not rows["floor"]:
        raise SystemExit("an invocation measured no floor rounds: drop --skip-floor")
    ours, floor = median_row(rows["chatsite"]), median_row(rows["floor"])
    return Invocation(
        tree=tree,
        efficiency=ours["efficiency"],
        floor_efficiency=floor["efficiency"],
        cpu=ours["cpu"],
        floor_cpu=floor["cpu"],
        paired=statistics.median(paired_ratios(rows, n)),
    )


def show(run: Invocation) -> None:
    print(
        f"{run.tree}: ratio {run.ratio:.2f} (paired {run.paired:.2f}), efficiency "
        f"{run.efficiency:.3f} (floor {run.floor_efficiency:.3f}), CPU ms per run "
        + " / ".join(f"{part} {run.cpu[part]:.1f}" for part in PARTS)
        + f", total {total(run.cpu):.1f} (floor {total(run.floor_cpu):.1f})",
        flush=True,
    )


def report(done: list[Invocation]) -> None:
    med = statistics.median
    medians: dict[str, dict[str, float]] = {}
    print(
        f"\n### base and head: medians of {len(done) // 2} invocations each (ranges in brackets)\n"
    )
    print(
        "| tree | ratio | paired ratio | efficiency | floor's | "
        + " | ".join(PARTS)
        + " | total | floor's total |"
    )
    print("|---|---|---|---|---|" + "---|" * (len(PARTS) + 2))
    for tree in ("base", "head"):
        runs = [run for run in done if run.tree == tree]

        def cell(values: list[float], digits: int = 2) -> str:
            return f"{med(values):.{digits}f} [{min(values):.{digits}f}–{max(values):.{digits}f}]"

        figures = {
            "ratio": [run.ratio for run in runs],
            "paired": [run.paired for run in runs],
            "efficiency": [run.efficiency for run in runs],
            "floor_efficiency": [run.floor_efficiency for run in runs],
            **{part: [run.cpu[part] for run in runs] for part in PARTS},
            "total": [total(run.cpu) for run in runs],
            "floor_total": [total(run.floor_cpu) for run in runs],
        }
        medians[tree] = {key: med(values) for key, values in figures.items()}
        print(
            f"| {tree} | {cell(figures['ratio'])} | {cell(figures['paired'])} | "
            f"{cell(figures['efficiency'], 3)} | {cell(figures['floor_efficiency'], 3)} | "
            + " | ".join(cell(figures[part], 1) for part in PARTS)
            + f" | {cell(figures['total'], 1)} | {cell(figures['floor_total'], 1)} |"
        )
    base, head = medians["base"], medians["head"]
    print(
        "| head / base | "
        + " | ".join(
            f"{head[key] / base[key]:.3f}"
            for key in ("ratio", "paired", "efficiency", "floor_efficiency")
        )
        + " | "
        + " | ".join(f"{head[part] / base[part]:.2f}" for part in PARTS)
        + f" | {head['total'] / base['total']:.3f}"
        + f" | {head['floor_total'] / base['floor_total']:.3f} |"
    )


if __name__ == "__main__":
    main()
