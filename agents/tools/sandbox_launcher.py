"""Runs the ``python`` tool's code inside the sandbox; never imported by the app.

bubblewrap starts this file with the sandbox's own interpreter (``SANDBOX_VENV``), so it may
use only the standard library and what that virtualenv holds. It sets the resource limits on
its own process before the model's code runs, so the code and every process it starts
inherit them and cannot raise them again; then it runs the code as ``__main__`` and saves the
matplotlib figures still open into the scratch folder, as PNG files the tool returns.

Arguments: the code's path, then the limits as JSON (``cpu_seconds``, ``memory_bytes``,
``processes``, ``file_bytes``, ``open_files``). Exit status 0 when the code ran to the end,
1 when it raised (the traceback is on stderr), ``MEMORY_EXIT`` when it ran out of memory.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import traceback

MEMORY_EXIT = 86


def _limit(which: int, value: int) -> None:
    resource.setrlimit(which, (value, value))


def _set_limits(limits: dict[str, int]) -> None:
    # The soft CPU limit sends SIGXCPU, which ends the process; the hard one a second later
    # is SIGKILL for code that catches SIGXCPU.
    cpu = limits["cpu_seconds"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    _limit(resource.RLIMIT_AS, limits["memory_bytes"])
    # Counted per user inside the sandbox's own user namespace: these processes only.
    _limit(resource.RLIMIT_NPROC, limits["processes"])
    _limit(resource.RLIMIT_FSIZE, limits["file_bytes"])
    _limit(resource.RLIMIT_NOFILE, limits["open_files"])
    _limit(resource.RLIMIT_CORE, 0)


def _save_open_figures() -> None:
    """Each figure still open as ``figure-<n>.png``, unless the code saved a PNG itself: a
    chart saved with ``savefig`` usually stays open too, and would come back twice."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None or any(name.lower().endswith(".png") for name in os.listdir(".")):
        return
    for number in pyplot.get_fignums():
        pyplot.figure(number).savefig(f"figure-{number}.png", format="png")


def _print_code_traceback() -> None:
    """The traceback without this file's frame: the model reads only its own code's."""
    kind, value, trace = sys.exc_info()
    traceback.print_exception(kind, value, trace.tb_next if trace else None)


def main() -> int:
    code_path, limits = sys.argv[1], json.loads(sys.argv[2])
    _set_limits(limits)
    sys.argv = [code_path]
    with open(code_path, encoding="utf-8") as source:
        compiled = compile(source.read(), code_path, "exec")
    status = 0
    try:
        exec(compiled, {"__name__": "__main__", "__file__": code_path})  # noqa: S102 (the sandbox's purpose)
    except MemoryError:
        _print_code_traceback()
        limits["memory_bytes"] // (1024 * 1024)
        return MEMORY_EXIT
    except SystemExit as exc:
        if exc.code not in (None, 0):
            status = exc.code if isinstance(exc.code, int) else 1
            if not isinstance(exc.code, int):
                pass
    except BaseException:
        _print_code_traceback()
        status = 1
    try:
        _save_open_figures()
    except Exception:
        traceback.print_exc()
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
