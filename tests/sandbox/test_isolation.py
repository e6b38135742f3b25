"""The python tool's sandbox, for real (bubblewrap, the sandbox's virtualenv): what the code
cannot reach, the limits it ends at, and that the worker's process is unharmed after."""

from __future__ import annotations

import os
import select
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from agents.tools.base import ToolError


def _parent(pid: str) -> str | None:
    try:
        status = (Path("/proc") / pid / "status").read_text()
    except OSError:
        return None
    parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
    return parent if parent != "0" else None


def _name(pid: str) -> str:
    try:
        return (Path("/proc") / pid / "comm").read_text().strip()
    except OSError:
        return ""


def _sandbox_processes() -> list[str]:
    """The pids of sandbox processes (bubblewrap and what runs inside) that this process
    started, or that outlived their bubblewrap (anyone's: none may). Sandboxes another test
    process runs at the same time (pytest-xdist) are not counted."""
    found = []
    ours = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"/sandbox/launcher.py" not in command:
            continue
        ancestors = []
        pid: str | None = entry.name
        while pid is not None and pid != "1":
            pid = _parent(pid)
            if pid is not None:
                ancestors.append(pid)
        if ours in ancestors or not any(_name(p) == "bwrap" for p in [entry.name, *ancestors]):
            found.append(entry.name)
    return found


def _still_works(python_tool) -> None:
    assert python_tool().run("print(6 * 7)") == "Output:\n42"
    assert _sandbox_processes() == []


def test_numpy_and_pandas_run_and_print(python_tool):
    out = python_tool().run(
        "import numpy as np, pandas as pd\n"
        "frame = pd.DataFrame({'x': np.arange(4)})\n"
        "print(int(frame.x.sum()))"
    )
    assert out == "Output:\n6"


def test_the_network_is_unreachable_even_on_loopback(python_tool):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        out = python_tool().run(
            "import socket\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "    print('connected')\n"
            "except OSError as exc:\n    print('refused', type(exc).__name__)\n"
            "print(sorted(name for _, name in socket.if_nameindex()))"
        )
        assert out.startswith("Output:\nrefused ConnectionRefusedError")
        assert "['lo']" in out  # an empty network namespace: loopback only, nothing on it
        # Nothing ever reached the listener on the worker's loopback.
        readable, _, _ = select.select([listener], [], [], 0)
        assert readable == []
    finally:
        listener.close()


def test_secrets_the_project_and_other_runs_are_out_of_reach(python_tool, tmp_path):
    # Another call's scratch folder, where the next call's would be made.
    base = Path(settings.SANDBOX_SCRATCH_DIR or tempfile.gettempdir())
    other_run = base / f"chatsite-sandbox-other-{uuid.uuid4().hex}"
    other_run.mkdir()
    try:
        (other_run / "notes.txt").write_text("another run's file")
        paths = [
            "/etc/shadow",
            "/etc/passwd",
            str(settings.VAR_DIR / "secret_key"),
            str(settings.BASE_DIR / "chatsite" / "settings.py"),
            str(other_run / "notes.txt"),
            "/root/.bashrc",
        ]
        code = (
            "for path in " + repr(paths) + ":\n"
            "    try:\n        open(path).read()\n        print('READ', path)\n"
            "    except OSError as exc:\n        print('no', type(exc).__name__)\n"
        )
        out = python_tool().run(code)
    finally:
        (other_run / "notes.txt").unlink()
        other_run.rmdir()
    assert "READ" not in out
    assert out.count("no ") == len(paths)


def test_the_code_writes_only_in_its_scratch_folder(python_tool):
    marker = f"sandbox-marker-{uuid.uuid4().hex}"
    targets = ["/usr/x", "/venv/x", "/data/x", "/etc/x", "/x", "/sandbox/x", "/proc/x"]
    code = (
        "for path in " + repr(targets) + ":\n"
        "    try:\n        open(path, 'w').write('x')\n        print('WROTE', path)\n"
        "    except OSError as exc:\n        print('no', path)\n"
        f"open('/tmp/{marker}', 'w').write('private')\n"
        "open('here.txt', 'w').write('scratch')\n"
        "import os; print(os.getcwd(), sorted(os.listdir('.')))"
    )
    out = python_tool().run(code)
    assert "WROTE" not in out
    assert out.count("no /") == len(targets)
    assert "/scratch ['here.txt']" in out
    # The sandbox's /tmp is its own.
    assert not (Path("/tmp") / marker).exists()


def test_an_endless_loop_ends_at_its_cpu_limit(python_tool):
    with pytest.raises(ToolError) as ended:
        python_tool(cpu_seconds=1, wall_seconds=600, timeout_seconds=900).run("while True:\n pass")
    assert str(ended.value) == "The code was stopped: it used up its 1 s of CPU time."
    _still_works(python_tool)


def test_sleeping_past_the_time_limit_is_killed_with_everything_it_started(python_tool):
    code = (
        "import subprocess, time\n"
        "subprocess.Popen(['/venv/bin/python', '-c', 'import time; time.sleep(600)'])\n"
        "print('started', flush=True)\n"
        "time.sleep(600)"
    )
    with pytest.raises(ToolError) as ended:
        python_tool(wall_seconds=3).run(code)
    assert str(ended.value).startswith(
        "The code was stopped: it ran past the time limit of 3 s.\nOutput:\nstarted"
    )
    _still_works(python_tool)


def test_a_10_gb_allocation_ends_at_the_memory_limit(python_tool):
    with pytest.raises(ToolError) as ended:
        python_tool(memory_mb=512).run("block = bytearray(10 * 1024 ** 3)")
    message = str(ended.value)
    assert message.startswith("The code ran out of memory: the limit is 512 MB.")
    assert 'File "/sandbox/code.py", line 1' in message
    assert "launcher.py" not in message  # the model reads its own code's traceback
    _still_works(python_tool)


def test_a_fork_bomb_ends_at_the_process_limit(python_tool):
    out = python_tool(max_processes=16).run("import os\nwhile True:\n    os.fork()")
    assert out.startswith(
        "Exit status 1. The code reached the sandbox's limit of 16 processes.\n\nErrors:\n"
    )
    assert "BlockingIOError" in out
    _still_works(python_tool)


def test_endless_output_ends_at_the_file_size_limit_and_is_cut(python_tool):
    out = python_tool(max_output_chars=200, max_file_mb=1).run("while True:\n print('y' * 100)")
    assert out.startswith(
        "Exit status 1. The code reached the sandbox's limit of 1 MB per file (what it prints "
        "counts as one).\n\nOutput:\n" + "y" * 100
    )
    assert "\n[output cut short]\n\nErrors:\n" in out
    assert out.endswith("OSError: [Errno 27] File too large")
    _still_works(python_tool)


def test_without_bubblewrap_the_tool_is_unavailable_and_runs_nothing(python_tool, settings):
    marker = Path("/tmp") / f"sandbox-unsandboxed-{uuid.uuid4().hex}"
    tool = python_tool()
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"
    with pytest.raises(ToolError) as refused:
        tool.run(f"open({str(marker)!r}, 'w').write('ran')")
    assert str(refused.value) == (
        "the python tool is unavailable on this server: bubblewrap (/nonexistent/bwrap) is "
        "not installed on this server. No code was run."
    )
    assert not marker.exists()
    # The model reads it in the tool's description too.
    assert "Unavailable on this server: bubblewrap" in python_tool().description


def test_without_the_sandbox_virtualenv_the_tool_is_unavailable(python_tool, settings, tmp_path):
    settings.SANDBOX_VENV = tmp_path / "no-venv"
    with pytest.raises(ToolError, match=r"virtualenv .* is missing: make sandbox-venv"):
        python_tool().run("print(1)")


def test_a_stopped_run_kills_the_sandbox_at_once(python_tool):
    from agents.react.tools import CallInterrupt, run_interruptibly

    interrupt = CallInterrupt()
    outcome: list[BaseException | str] = []

    def call() -> None:
        tool = python_tool(wall_seconds=3000, timeout_seconds=3600)
        try:
            outcome.append(run_interruptibly(interrupt, lambda: tool.run("while True:\n pass")))
        except ToolError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    started = time.monotonic()
    # Wait for the condition (the launcher is running), not for a time.
    while not _sandbox_processes():
        assert time.monotonic() - started < 60, "the sandbox never started"
        time.sleep(0.05)
    interrupt.interrupt()
    thread.join(timeout=60)
    assert not thread.is_alive()
    [ended] = outcome
    assert str(ended) == "The code was stopped because the run was stopped."
    assert _sandbox_processes() == []


def test_a_bubblewrap_that_cannot_make_a_sandbox_makes_the_tool_unavailable(python_tool, settings):
    # Installed but refused its namespaces (a container without user namespaces), as a
    # binary that fails every start does.
    settings.SANDBOX_BWRAP = "/bin/false"
    with pytest.raises(ToolError) as refused:
        python_tool().run("print(1)")
    assert str(refused.value) == (
        "the python tool is unavailable on this server: bubblewrap cannot make a sandbox "
        "here (1). No code was run."
    )
