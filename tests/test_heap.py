"""daphne and the worker freeze their start-up heap and set the collector's thresholds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from chatsite.server.process.heap import collection_thresholds


def _start_daphnes_application(gc_thresholds: str) -> subprocess.CompletedProcess:
    # chatsite.asgi freezes the heap as its last step, as daphne loads it.
    code = (
        "import gc\n"
        "import chatsite.asgi\n"
        "print(gc.get_threshold(), gc.get_freeze_count() > 10_000)\n"
    )
    env = {**os.environ, "GC_THRESHOLDS": gc_thresholds}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )


def test_the_application_sets_the_thresholds_after_freezing():
    done = _start_daphnes_application("1234,5,6")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1234, 5, 6) True"


def test_thresholds_that_would_stop_the_collector_are_refused_as_settings_load():
    done = _start_daphnes_application("0,10,10")
    assert done.returncode != 0
    assert "GC_THRESHOLDS must be three whole numbers of at least 1" in done.stderr


@pytest.mark.parametrize(
    "values", [(700, 10), (700, 10, 10, 10), (700, -1, 10), ("700", "ten", "10"), ("",)]
)
def test_collection_thresholds_refuses_anything_but_three_positive_numbers(values):
    with pytest.raises(ImproperlyConfigured, match="got " + ",".join(map(str, values))):
        collection_thresholds(values)


def test_collection_thresholds_passes_three_positive_numbers():
    assert collection_thresholds(("10000", "10", "10")) == (10_000, 10, 10)
    assert collection_thresholds((700, 1, 1)) == (700, 1, 1)
