"""How much CPU the garbage collector takes in each process of a benchmark.

Put this folder on ``PYTHONPATH`` with ``GC_PROBE_OUT`` set, and every Python process
started with that environment (daphne, the celery worker, the benchmark itself) appends a
line a second to ``$GC_PROBE_OUT.<pid>``: its CPU seconds so far and, per generation, the
collections and the CPU seconds they took (``gc.callbacks``, the collecting thread's CPU
time). ``bench/gc_report.py`` sums them per process::

    PYTHONPATH=bench/gc_probe GC_PROBE_OUT=/tmp/gc .venv/bin/python bench/run_vs_floor.py \\
        --runs 200 --repeats 2 --skip-floor
    .venv/bin/python bench/gc_report.py /tmp/gc
"""

import gc
import os
import sys
import threading
import time

_OUT = os.environ.get("GC_PROBE_OUT")


def _install(out: str) -> None:
    spent = {generation: [0, 0.0] for generation in range(3)}
    started: dict[int, float] = {}

    def on_collect(phase: str, info: dict) -> None:
        thread = threading.get_ident()
        if phase == "start":
            started[thread] = time.thread_time()
            return
        began = started.pop(thread, None)
        if began is not None:
            entry = spent[info["generation"]]
            entry[0] += 1
            entry[1] += time.thread_time() - began

    gc.callbacks.append(on_collect)

    def write_forever() -> None:
        path = f"{out}.{os.getpid()}"
        with open(path, "a") as file:
            file.write("argv=" + " ".join(sys.argv[:3]) + "\n")
        while True:
            time.sleep(1)
            counts = " ".join(f"g{g}={n}/{s:.4f}" for g, (n, s) in spent.items())
            with open(path, "a") as file:
                file.write(f"{time.time():.1f} cpu={time.process_time():.3f} {counts}\n")

    threading.Thread(target=write_forever, name="gc-probe", daemon=True).start()


if _OUT and "pytest" not in sys.modules:
    _install(_OUT)
