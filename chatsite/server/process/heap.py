"""The garbage collector in the long-lived processes (daphne, the celery worker).

Everything imported at start-up (Django, the app, their libraries: hundreds of thousands of
objects) lives as long as the process, yet CPython's full collections walk all of it again
and again: a share of a worker's CPU under load went to the collector, most of it to those
walks (docs/performance.md#heap). ``gc.freeze`` moves what exists once
start-up is done into a generation the collector never visits; objects made afterwards are
collected as before, by the thresholds of ``GC_THRESHOLDS`` (chatsite/settings.py).
"""

import gc
from collections.abc import Sequence

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def freeze_startup_objects() -> None:
    """Freeze the start-up heap, then set ``GC_THRESHOLDS``: the youngest generation
    collected every 10,000 net allocations rather than 700 (docs/performance.md#heap)."""
    gc.collect()  # garbage of the start-up itself is freed, not kept for ever
    gc.freeze()
    gc.set_threshold(*settings.GC_THRESHOLDS)


def collection_thresholds(values: Sequence[str | int]) -> tuple[int, int, int]:
    """``GC_THRESHOLDS`` checked as settings are read, so that a bad value stops daphne,
    the worker and ``manage.py`` alike: three whole numbers of at least 1 (0 would turn the
    collector off, and cyclic garbage would never be freed)."""
    try:
        numbers = [int(value) for value in values]
    except ValueError:
        numbers = []
    if len(numbers) != 3 or any(number < 1 for number in numbers):
        raise ImproperlyConfigured(
            f"GC_THRESHOLDS must be three whole numbers of at least 1, such as 10000,10,10; "
            f"got {','.join(map(str, values))}"
        )
    return numbers[0], numbers[1], numbers[2]
