"""Each thread's CPU time in a process of a benchmark, on request.

Put this folder on ``PYTHONPATH``, and every Python process started with that environment
(daphne, the celery worker) writes, on ``SIGUSR2``, one line per live thread to
``/tmp/thread-cpu.<pid>``: its native id, its name and its CPU seconds so far, read from the
thread's own CPU clock (``pthread_getcpuclockid``), then the process's. The per-thread times
in ``/proc/<pid>/task/*/stat`` are sampled at the scheduler's tick, and a thread that runs in
bursts shorter than a tick (a task pool's thread, between waits) showed close to nothing
there. ``bench/thread_cpu.py`` drives it.
"""

import contextlib
import os
import signal
import threading
import time


def _write(signum: int, frame: object) -> None:
    lines = []
    for thread in threading.enumerate():
        try:
            clock = time.pthread_getcpuclockid(thread.ident or 0)
            seconds = time.clock_gettime(clock)
        except (OSError, OverflowError):
            continue  # the thread ended meanwhile
        lines.append(f"{thread.native_id}|{thread.name}|{seconds:.6f}")
    lines.append(f"process|process|{time.process_time():.6f}")
    path = f"/tmp/thread-cpu.{os.getpid()}"
    with open(path + ".tmp", "w") as out:
        out.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


# ValueError: not the main thread of the main interpreter.
with contextlib.suppress(ValueError):
    signal.signal(signal.SIGUSR2, _write)
