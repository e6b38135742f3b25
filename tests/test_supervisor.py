"""``chatsite/server/process/supervisor.py``: the restart policy of ``manage.py serve``, with
real child processes and a clock the test moves."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from chatsite.server.process.supervisor import Child, RestartPolicy, Supervisor

EXIT_3 = [sys.executable, "-c", "import sys; sys.exit(3)"]
SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
IGNORES_TERM = [
    sys.executable,
    "-c",
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
    " print('ready', flush=True); time.sleep(60)",
]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _supervisor(command, clock, **policy) -> tuple[Supervisor, io.StringIO]:
    log = io.StringIO()
    supervisor = Supervisor(
        [Child("job", command, {})],
        log=log,
        clock=clock,
        policy=RestartPolicy(base_delay=1, max_delay=8, stable_after=60, **policy),
    )
    return supervisor, log


def _wait_exit(supervisor: Supervisor) -> None:
    process = supervisor.children[0].process
    assert process is not None
    process.wait(timeout=10)


def test_delay_doubles_per_quick_death_and_is_capped():
    policy = RestartPolicy(base_delay=1, max_delay=8)
    assert [policy.delay(quick_deaths=n) for n in range(1, 7)] == [1, 2, 4, 8, 8, 8]


def test_a_dead_child_is_started_again_after_the_delay_with_a_log_line(clock):
    supervisor, log = _supervisor(EXIT_3, clock)
    supervisor.start()
    first = supervisor.children[0].process
    _wait_exit(supervisor)

    supervisor.check()
    assert "serve: job exited with code 3; restarting it in 1 s" in log.getvalue()
    clock.now += 0.5
    supervisor.check()
    assert supervisor.children[0].process is first  # still waiting

    clock.now += 0.6
    supervisor.check()
    child = supervisor.children[0]
    assert child.process is not first
    assert child.restarts == 1
    assert f"serve: restarted job (pid {child.process.pid})" in log.getvalue()
    _wait_exit(supervisor)


def test_quick_deaths_back_off_and_a_stable_run_resets_the_delay(clock):
    supervisor, log = _supervisor(EXIT_3, clock)
    supervisor.start()
    for expected in (1, 2, 4):
        _wait_exit(supervisor)
        supervisor.check()
        assert (
            log.getvalue()
            .splitlines()[-1]
            .startswith(f"serve: job exited with code 3; restarting it in {expected} s")
        )
        clock.now += expected
        supervisor.check()

    # This time it "stayed up" for longer than stable_after before dying.
    _wait_exit(supervisor)
    clock.now += 61
    supervisor.check()
    assert "restarting it in 1 s (quick restart 1 in a row)" in log.getvalue().splitlines()[-1]


def test_stop_terminates_children_and_kills_one_that_ignores_sigterm(clock):
    log = io.StringIO()
    supervisor = Supervisor(
        [Child("calm", SLEEP, {}), Child("stubborn", IGNORES_TERM, {})],
        log=log,
        spawn=lambda command, env: subprocess.Popen(command, stdout=subprocess.PIPE),
    )
    supervisor.start()
    stubborn = supervisor.children[1].process
    assert stubborn.stdout.readline() == b"ready\n"  # its SIGTERM handler is installed

    supervisor.stop(timeout=1)
    assert supervisor.children[0].process.returncode == -15
    assert stubborn.returncode == -9
