"""The rounds ``bench/run_vs_floor.py`` measures, as the JSON lines its ``--out`` appends, and
what is computed from them: medians, CPU totals, ratios against the floor. No Django here,
so ``bench/compare_trees.py`` reads another tree's rounds with the same rules."""

from __future__ import annotations

import statistics

PROCESSES = ("worker", "socket", "pg_all", "pg_own", "redis")
# Not the system's: the load generator (the sockets' clients and the model server: this
# process and the floor's model server for chatsite, or this process alone with
# ``--model-server scripted``; two processes for the floor). It shares the two cores with the
# system, so a dearer one lowers the system's efficiency without showing in its CPU.
LOADGEN = "loadgen"


def median_row(rows: list[dict]) -> dict:
    med = statistics.median
    return {
        "wall": med(r["wall"] for r in rows),
        "efficiency": med(r["efficiency"] for r in rows),
        "accepted": med(r["accepted"] for r in rows),
        "p50": med(r["p50"] for r in rows),
        "p99": med(r["p99"] for r in rows),
        "clean": min(r["clean"] for r in rows),
        "cpu": {k: med(r["cpu"][k] for r in rows) for k in (*PROCESSES, LOADGEN)},
        "rss": {k: max(r["rss"][k] for r in rows) for k in rows[0]["rss"]},
    }


def total(cpu_ms: dict[str, float]) -> float:
    """Worker + socket server + PostgreSQL (own) + Redis."""
    return cpu_ms["worker"] + cpu_ms["socket"] + cpu_ms["pg_own"] + cpu_ms["redis"]


def paired_ratios(rows: dict[str, list[dict]], n: int) -> list[float]:
    """chatsite's CPU per run over the floor's, repeat by repeat: the two blocks of a repeat
    run one after the other, so a pair shares the machine's state, which on a shared machine
    moves more between repeats than the ratio does within one."""
    ours = [r for r in rows["chatsite"] if r["n"] == n]
    floors = [r for r in rows["floor"] if r["n"] == n]
    return [total(a["cpu"]) / total(b["cpu"]) for a, b in zip(ours, floors, strict=False)]
