"""The suite's network guard (tests/network_guard.py): loopback and unix sockets only, in the
test process and in the worker and daphne processes it starts."""

from __future__ import annotations

import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from pytest_socket import SocketConnectBlockedError

from tests.processes import BASE_DIR, GUARDED_PYTHON, DaphneProcess, WorkerProcess

# TEST-NET-1 (RFC 5737): documentation only, never routed, so nothing is ever reached here.
OUTSIDE = ("192.0.2.1", 80)


def test_a_connection_outside_loopback_is_refused_and_named():
    with (
        pytest.warns(UserWarning, match="192.0.2.1"),  # also a warning, should it be swallowed
        pytest.raises(SocketConnectBlockedError, match=r'host "192\.0\.2\.1"'),
    ):
        socket.create_connection(OUTSIDE, timeout=5)


def test_a_name_that_is_not_loopback_is_refused():
    with (
        pytest.warns(UserWarning, match="example.com"),
        pytest.raises(SocketConnectBlockedError, match=r'host "example\.com"'),
        socket.socket() as sock,
    ):
        sock.connect(("example.com", 80))


def test_loopback_and_unix_sockets_still_work():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
        with socket.create_connection(("localhost", server.getsockname()[1]), timeout=5):
            pass
    with tempfile.TemporaryDirectory() as folder, socket.socket(socket.AF_UNIX) as server:
        path = str(Path(folder) / "sock")
        server.bind(path)
        server.listen()
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)


def test_the_processes_the_suite_starts_run_guarded():
    worker, daphne = WorkerProcess({}), DaphneProcess({})
    assert worker.command()[: len(GUARDED_PYTHON)] == list(GUARDED_PYTHON)
    assert daphne.command()[: len(GUARDED_PYTHON)] == list(GUARDED_PYTHON)
    for process in (worker, daphne):
        process.log_path.unlink()

    probe = (
        "import socket\n"
        "with socket.socket() as server:\n"
        "    server.bind(('127.0.0.1', 0)); server.listen()\n"
        "    socket.create_connection(server.getsockname(), timeout=5).close()\n"
        "print('loopback ok', flush=True)\n"
        f"socket.create_connection({OUTSIDE!r}, timeout=5)\n"
    )
    result = subprocess.run(
        [*GUARDED_PYTHON, "-c", probe], cwd=BASE_DIR, capture_output=True, text=True, timeout=60
    )
    assert result.stdout == "loopback ok\n"
    assert result.returncode == 1
    refusal = 'A test tried to use socket.socket.connect() with host "192.0.2.1"'
    assert f"SocketConnectBlockedError: {refusal}" in result.stderr


def test_a_module_runs_as_its_main_under_the_guard():
    result = subprocess.run(
        [*GUARDED_PYTHON, "json.tool", "--compact"],
        cwd=BASE_DIR, input='{"a": [1, 2]}', capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (0, '{"a":[1,2]}\n'), result.stderr


def test_no_test_may_lift_the_guard(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(BASE_DIR))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.enable_socket
        def test_wants_the_internet():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "tests.network_guard")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*tests may not lift the network guard*"])
