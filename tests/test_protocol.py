"""agents/protocol.py is the one place the wire protocol is spelled out."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from agents.protocol import TERMINAL_FRAME_TYPES, FrameType, RefusalCode, error_frame

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "agents"
# The dotted frame types cannot be mistaken for ordinary words ("error", "step" are both).
DOTTED_TYPES = {member.value for member in FrameType if "." in member.value}


def _python_files() -> list[Path]:
    return sorted(p for p in AGENTS.rglob("*.py") if "migrations" not in p.parts)


def test_frame_types_are_spelled_only_in_the_protocol_module():
    offenders = []
    for path in _python_files():
        if path == AGENTS / "protocol.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and node.value in DOTTED_TYPES:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert offenders == []


def test_frames_serialise_with_the_plain_strings():
    frame = error_frame(RefusalCode.RUN_IN_PROGRESS, "Wait.", client_id="c1")
    assert json.loads(json.dumps(frame)) == {
        "type": "error",
        "code": "run_in_progress",
        "message": "Wait.",
        "client_id": "c1",
    }
    assert "run.failed" in TERMINAL_FRAME_TYPES
    assert "answer.delta" not in TERMINAL_FRAME_TYPES


def test_every_refusal_code_is_documented():
    documented = (ROOT / "docs" / "protocol.md").read_text()
    missing = [code.value for code in RefusalCode if f"`{code.value}`" not in documented]
    assert missing == []


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(path: Path, known: set[str]) -> set[str]:
    """Modules of agents/ that ``path`` imports when it is loaded (not inside functions,
    not under TYPE_CHECKING)."""
    imported: set[str] = set()
    for statement in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            continue
        if not isinstance(statement, ast.Import | ast.ImportFrom | ast.If | ast.Try):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
    return imported & known


def test_no_import_cycle_between_modules_of_agents():
    files = {_module_name(path): path for path in _python_files()}
    graph = {name: _module_level_imports(path, set(files)) for name, path in files.items()}
    cycles = []
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            cycles.append(" -> ".join([*trail[trail.index(name) :], name]))
            return
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert cycles == []
