"""House rules that are easy to break by accident, checked on the source itself."""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "agents"


def _imports(path: Path) -> set[str]:
    """Every module name an import statement in ``path`` names, and imported names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "migrations" not in p.parts)


@pytest.mark.parametrize("path", _python_files(AGENTS / "react"), ids=lambda p: p.name)
def test_the_engine_is_pure_python(path):
    """agents/react must not know about Django, Celery or Channels (docs/architecture.md)."""
    forbidden = ("django", "celery", "channels", "asgiref")
    leaks = sorted(n for n in _imports(path) if n.split(".")[0] in forbidden)
    assert leaks == [], f"{path.relative_to(ROOT)} imports {leaks}"


def test_only_events_module_talks_to_the_channel_layer():
    """Publishing happens in one place, after commit (agents/events.py)."""
    offenders = []
    for path in _python_files(AGENTS):
        if path == AGENTS / "events.py":
            continue
        names = _imports(path)
        text = path.read_text()
        if (
            any(n == "channels.layers" or n.startswith("channels.layers.") for n in names)
            or "get_channel_layer" in text
            or "group_send" in text
        ):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_the_engine_folder_is_checked():
    assert (AGENTS / "react" / "types.py") in _python_files(AGENTS / "react")


@pytest.mark.parametrize("entry", ["chatsite.asgi", "agents.tasks"])
def test_the_servers_load_the_mcp_sdk_and_the_openapi_validator_only_when_used(entry):
    """They are a large share of every daphne's and worker's memory
    (docs/performance.md#start-up-imports); a site without MCP servers or OpenAPI imports
    never needs them."""
    import subprocess
    import sys

    heavy = ("mcp", "mcp_types", "openapi_spec_validator")
    script = (
        "import sys, django; django.setup(); import chatsite.celery; "
        f"import {entry}; "
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert loaded.stdout.strip() == "[]"


# Raw SQL lives in agents/db/statements.py, composed with psycopg.sql, and only that module
# asks which database this is; everything else asks its capabilities (issue 36).
STATEMENTS = AGENTS / "db" / "statements.py"


def _project_modules() -> list[Path]:
    """Every Python module of the project but its tests (migrations included); not var/,
    the local data, which holds the python tool's virtualenv (numpy and the rest), nor
    mutants/, the copy of the project `make mutation` leaves (docs/testing.md)."""
    found = list(ROOT.glob("*.py"))
    for folder in ROOT.iterdir():
        if (
            folder.is_dir()
            and folder.name not in ("tests", "var", "mutants")
            and not folder.name.startswith(".")
        ):
            found.extend(folder.rglob("*.py"))
    return sorted(found)


def _reads_the_vendor(path: Path) -> bool:
    """Whether ``path`` reads a ``.vendor`` attribute (``connection.vendor`` and the like)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return any(isinstance(node, ast.Attribute) and node.attr == "vendor" for node in ast.walk(tree))


def test_raw_sql_and_vendor_checks_live_in_the_statements_module():
    offenders = [
        str(path.relative_to(ROOT))
        for path in _project_modules()
        if path != STATEMENTS and ("noqa: S608" in path.read_text() or _reads_the_vendor(path))
    ]
    assert offenders == [], (
        "move the statement into agents/db/statements.py (psycopg.sql needs no noqa), and ask "
        f"a capability there instead of the vendor: {offenders}"
    )


def test_the_sql_guard_sees_what_it_guards(tmp_path):
    """The guard finds a vendor test and looks where the project's modules are."""
    sample = tmp_path / "sample.py"
    sample.write_text('if connection.vendor == "sqlite":\n    pass\n')
    assert _reads_the_vendor(sample)
    assert _reads_the_vendor(STATEMENTS)
    modules = _project_modules()
    assert AGENTS / "services" / "knowledge.py" in modules
    assert AGENTS / "migrations" / "0013_run_updates_stay_on_their_page.py" in modules
    assert ROOT / "chatsite" / "settings.py" in modules
    assert not any("tests" in path.relative_to(ROOT).parts for path in modules)


@functools.cache
def _import_graph() -> dict[str, set[str]]:
    """Which modules of agents and chatsite each one imports, as grimp reads them: imports
    inside functions and under TYPE_CHECKING count. A package is not imported by importing
    one of its modules here: only import statements make edges."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("agents", "chatsite", cache_dir=None)
    return {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of ``graph``, iteratively (the graph is deep
    enough for Python's recursion limit to matter): each set of modules that import each
    other, directly or around a loop. A module alone is a component of its own."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def _cycles(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    return [
        component
        for component in strongly_connected(graph)
        if len(component) > 1 or next(iter(component)) in graph[next(iter(component))]
    ]


def test_no_module_of_agents_or_chatsite_is_in_an_import_cycle():
    """docs/architecture.md: no import cycles, imports inside functions included. A cycle
    is broken by design (a piece moved down a layer, a function passed in, a task sent by
    name), never by hiding one import in a function."""
    cycles = _cycles(_import_graph())

    assert cycles == [], "import cycles:\n" + "\n".join(
        " <-> ".join(sorted(cycle)) for cycle in cycles
    )


def test_the_cycle_finder_sees_a_cycle_through_several_modules_and_none_in_a_chain():
    looped = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    chain = {"a": {"b"}, "b": {"c"}, "c": set()}

    assert sorted(map(sorted, _cycles(looped))) == [["a", "b", "c"], ["e"]]
    assert _cycles(chain) == []


def test_the_import_graph_counts_imports_inside_functions():
    """What a function imports (the tool registry's built-in tools) and what is imported
    for type checking only are edges like any other."""
    graph = _import_graph()

    assert "agents.tools.builtin.mcp_tool" in graph["agents.tools.registry"]  # in a function
    assert "agents.models" in graph["agents.llm.factory"]  # under TYPE_CHECKING


# Code, docs, requirements and the Makefile cite docs/performance.md by anchor
# (``docs/performance.md#claim``); each anchor must exist there, or the citation leads nowhere.
PERFORMANCE = ROOT / "docs" / "performance.md"
_ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
_CITATION = re.compile(r"performance\.md#([A-Za-z0-9_-]+)")


def _citing_files() -> list[Path]:
    """The project's modules (tests included), its docs, requirements and Makefile."""
    found = [*_project_modules(), *ROOT.glob("tests/**/*.py"), *ROOT.glob("*.md")]
    found += [*ROOT.glob("docs/**/*.md"), *ROOT.glob("requirements*.txt"), ROOT / "Makefile"]
    return sorted(set(found))


def _missing_anchors(files: Iterable[Path], anchors: set[str]) -> list[str]:
    return [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: #{anchor}"
        for path in files
        for anchor in _CITATION.findall(path.read_text(encoding="utf-8"))
        if anchor not in anchors
    ]


def test_every_cited_performance_anchor_exists():
    anchors = set(_ANCHOR.findall(PERFORMANCE.read_text(encoding="utf-8")))
    missing = _missing_anchors(_citing_files(), anchors)

    assert missing == [], f"docs/performance.md has no such anchor: {missing}"


def test_the_anchor_check_finds_a_missing_anchor_and_looks_everywhere(tmp_path):
    anchors = set(_ANCHOR.findall(PERFORMANCE.read_text(encoding="utf-8")))
    assert {"claim", "heap", "how-to-measure"} <= anchors
    sample = tmp_path / "sample.py"
    missing = "no-such-part"  # not written after the ".md#" here, or this file would cite it
    sample.write_text(f"# (docs/performance.md#claim) and (docs/performance.md#{missing})\n")

    assert _missing_anchors([sample], anchors) == [f"{sample}: #{missing}"]
    files = _citing_files()
    for expected in ("Makefile", "requirements.txt", "README.md", "docs/architecture.md"):
        assert ROOT / expected in files
    assert ROOT / "tests" / "test_architecture.py" in files
    assert ROOT / "chatsite" / "server" / "loop.py" in files
