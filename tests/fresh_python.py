"""Checks run in a Python process of their own, for imports that change a process for good
(``chatsite.server.process.daphne`` installs uvloop and patches autobahn; ``daphne.server`` installs
Twisted's reactor)."""

from __future__ import annotations

import subprocess
import sys


def assert_prints_ok(code: str) -> None:
    """Run ``code`` with ``python -c`` in this environment; it must print ``ok``, exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
