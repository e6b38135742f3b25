"""The garbage collector in the long-lived processes (daphne, the celery worker).

Everything imported at start-up (Django, the app, their libraries: hundreds of thousands of
objects) lives as long as the process, yet CPython's full collections walk all of it again
and again: about a tenth of a worker's CPU under load went to the collector, most of it to
those walks (docs/performance.md, "An eleventh round"). ``gc.freeze`` moves what exists once
start-up is done into a generation the collector never visits; objects made afterwards are
collected as before.
"""

import gc


def freeze_startup_objects() -> None:
    gc.collect()  # garbage of the start-up itself is freed, not kept for ever
    gc.freeze()
