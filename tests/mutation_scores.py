"""The mutation score of each safety-critical module, from what ``mutmut run`` left in
``mutants/`` (``make mutation``; docs/testing.md).

A mutant counts as killed when a test failed, timed out or the type checker refused it.
The score is killed / (checked - equivalent): the accepted equivalent mutants are the names
listed in docs/testing.md, so the list and its reasons live in one place. Mutants that
were not checked (a run limited to some modules, or interrupted) are shown, not scored.

    python -m tests.mutation_scores
    python -m tests.mutation_scores --survivors           # and the names of the survivors
    python -m tests.mutation_scores --sample MODULE SIZE SEED   # a seeded sample's names
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "testing.md"
MUTANTS = ROOT / "mutants"

KILLED_CODES = {1, 3, 36, 24, -24, 152, 255, 37}  # failed, timed out, refused by the type check
NOT_CHECKED = None
NO_TESTS_CODES = {5, 33}

# The engine's decisions before a tool runs: approval, the budgets, the start of a call.
DECISIONS = {
    "agents.react.executor": {"_hold_before_tools", "_start_tool", "_check_budget"},
    "agents.react.transcript": {"calls_run"},
}

_NAME = re.compile(r"`(agents\.[\w.ǁ]+__mutmut_\d+)`")


@dataclass
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)

    def add(self, name: str, exit_code: int | None, equivalent: set[str]) -> None:
        if exit_code is NOT_CHECKED:
            self.counts["not checked"] += 1
        elif name in equivalent:
            self.counts["equivalent"] += 1
        elif exit_code in KILLED_CODES:
            self.counts["killed"] += 1
        else:
            self.counts["no tests" if exit_code in NO_TESTS_CODES else "survived"] += 1
            self.survivors.append(name)

    @property
    def scored(self) -> int:
        return self.counts["killed"] + self.counts["survived"] + self.counts["no tests"]

    def line(self, label: str) -> str:
        score = f"{100 * self.counts['killed'] / self.scored:5.1f} %" if self.scored else "    -  "
        parts = ", ".join(
            f"{self.counts[key]} {key}"
            for key in ("killed", "survived", "no tests", "equivalent", "not checked")
            if self.counts[key]
        )
        return f"  {label:<34} {score}   ({parts})"


def equivalent_mutants(docs: Path = DOCS) -> set[str]:
    return set(_NAME.findall(docs.read_text(encoding="utf-8"))) if docs.exists() else set()


def function_of(name: str) -> str:
    """``agents.x.xǁClassǁmethod__mutmut_3`` -> ``method``; ``agents.x.x_func__mutmut_3`` ->
    ``func``."""
    stem = name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[1]
    return stem.rsplit("ǁ", 1)[1] if "ǁ" in stem else stem.removeprefix("x_")


def sample(module: str, size: int, seed: int) -> list[str]:
    """``size`` of ``module``'s mutants, drawn with ``seed`` (the same names for the same
    mutants): for a module too slow to check whole (``make mutation-sample``)."""
    meta = MUTANTS.joinpath(*module.split(".")).with_suffix(".py.meta")
    names = sorted(json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"])
    return random.Random(seed).sample(names, min(size, len(names)))


def main() -> int:
    if sys.argv[1:2] == ["--sample"]:
        module, size, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        print("\n".join(sample(module, size, seed)))
        return 0
    metas = sorted(MUTANTS.glob("agents/**/*.py.meta"))
    if not metas:
        print("no results in mutants/: run `make mutation` first")
        return 1
    equivalent = equivalent_mutants()
    decisions = Tally()
    verbose = "--survivors" in sys.argv
    print("mutation score per module (killed / mutants not documented as equivalent)")
    for meta in metas:
        module = ".".join(meta.relative_to(MUTANTS).with_suffix("").with_suffix("").parts)
        tally = Tally()
        exit_codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        for name, exit_code in exit_codes.items():
            tally.add(name, exit_code, equivalent)
            if function_of(name) in DECISIONS.get(module, ()):
                decisions.add(name, exit_code, equivalent)
        print(tally.line(module))
        if verbose:
            for name in tally.survivors:
                print(f"      {name}")
    print(decisions.line("decisions (approval, budgets)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
