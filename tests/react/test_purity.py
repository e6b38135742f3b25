"""agents/react is pure Python: importing it loads no Django, Celery or Channels."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "agents" / "react"
FORBIDDEN = ("django", "celery", "channels", "asgiref", "kombu", "daphne", "redis")
ENGINE_FILES = sorted(ENGINE.rglob("*.py"))


def test_importing_the_engine_loads_no_framework():
    modules = sorted(
        f"agents.react.{path.stem}" for path in ENGINE_FILES if path.stem != "__init__"
    )
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=ENGINE.parents[1],
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    loaded = json.loads(result.stdout)
    assert "agents.react.executor" in loaded
    leaks = sorted(name for name in loaded if name.split(".")[0] in FORBIDDEN)
    assert leaks == []


@pytest.mark.parametrize("path", ENGINE_FILES, ids=lambda path: path.name)
def test_engine_modules_import_only_the_engine_and_libraries(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module)
    outside = [
        name
        for name in imported
        if name.split(".")[0] in FORBIDDEN
        or (name.startswith("agents") and not name.startswith("agents.react"))
    ]
    assert outside == []
