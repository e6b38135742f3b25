"""A pytest plugin for ``make mutation`` (``[tool.mutmut]`` in pyproject.toml loads it with
``-p``): it makes a mutant of the engine cost about a second instead of tens.

mutmut runs, for each mutant, every test that reached the mutated function. For the parser
and the transcript that is nearly all of ``tests/react``, and some tests elsewhere that reach
the engine through Django and the database; and each test of ``tests/react`` runs twice (the
``driver`` fixture: ``run`` in the test's thread, then ``arun`` on the process's loop). So a
mutant of the engine (``agents/react/``, pure Python) is checked by the engine's own tests,
``tests/react``, with the thread driver alone: both drivers go through the same decisions,
parser and transcript, and the loop's own code (``arun`` and the process loop) is checked by
``make test``, not here.

Outside a mutant's run (mutmut's stats and clean runs, an ordinary ``pytest``) it changes
nothing.
"""

from __future__ import annotations

import os

import pytest

# mutmut's names for the runs that are not a mutant's: its stats, the clean run, the forced
# failure, the generation of the mutants and the listing of the tests.
_NOT_A_MUTANT = {"", "stats", "fail", "mutant_generation", "list_all_tests"}


def _engine_mutant() -> bool:
    name = os.environ.get("MUTANT_UNDER_TEST", "")
    return name not in _NOT_A_MUTANT and name.startswith("agents.react.")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _engine_mutant():
        return
    kept = [item for item in items if _engine_test(item) and _driver(item) != "loop"]
    if len(kept) == len(items):
        return
    kept_ids = {id(item) for item in kept}
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept_ids])
    items[:] = kept


def _engine_test(item: pytest.Item) -> bool:
    return item.nodeid.startswith("tests/react/")  # mutmut runs pytest with --rootdir=.


def _driver(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("driver") if callspec is not None else None
