"""Tests never reach the network: only loopback and unix sockets may be connected to.

pytest-socket does the refusing. As a pytest plugin (``-p tests.network_guard`` in
pyproject.toml) this module hands it the allow-list before it reads its options, so every
test runs guarded: a connection anywhere else raises ``SocketConnectBlockedError`` naming
the host. pytest-socket guards from each test's setup to its teardown, so session fixtures
created by a test (the scripted server, the worker and daphne handles) are guarded too.

The worker and daphne processes the suite starts (``tests/processes.py``) run their module
through this one, which installs the same guard for the life of the process::

    python -m tests.network_guard celery -A chatsite worker ...
    python -m tests.network_guard -c "import socket; ..."

Processes those start in turn (``manage.py serve``'s children) are not guarded.
"""

from __future__ import annotations

import runpy
import sys

import pytest
import pytest_socket

# Networks, not single addresses: a test may listen on any 127.x address.
ALLOWED_HOSTS = ("127.0.0.0/8", "::1/128", "localhost")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before pytest-socket's own ``pytest_configure`` reads these options."""
    config.option.allow_hosts = ",".join(ALLOWED_HOSTS)
    config.option.allow_unix_socket = True
    config.option.force_enable_socket = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """pytest-socket's way out of the guard is closed: no test may lift it."""
    lifting = [
        item.nodeid
        for item in items
        if item.get_closest_marker("enable_socket")
        or "socket_enabled" in getattr(item, "fixturenames", ())
    ]
    if lifting:
        raise pytest.UsageError(f"tests may not lift the network guard: {lifting}")


def guard_this_process() -> None:
    """From now on this process may connect only to loopback and unix sockets."""
    pytest_socket.socket_allow_hosts(list(ALLOWED_HOSTS), allow_unix_socket=True)


def main(argv: list[str]) -> None:
    """``MODULE ARGS...`` runs MODULE as ``python -m`` would; ``-c CODE`` runs CODE."""
    if not argv:
        raise SystemExit("usage: python -m tests.network_guard (MODULE | -c CODE) [ARGS...]")
    guard_this_process()
    # The suite's other concern for its long-lived processes (tests/flushed_database.py).
    from tests.flushed_database import forget_content_types_per_request

    forget_content_types_per_request()
    if argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        return
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
