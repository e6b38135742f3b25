"""agents/tasks.py: a worker's threads set runs up a few at a time
(``AGENT_RUN_SETUPS_AT_ONCE``), so a burst of runs does not hold a database connection, and
open a PostgreSQL backend, for every Celery thread at once."""

from __future__ import annotations

import threading

from django.conf import settings

from agents import tasks
from tests.faults.checks import wait_until


def test_runs_are_set_up_a_few_at_a_time_and_each_in_turn(monkeypatch):
    at_once = settings.AGENT_RUN_SETUPS_AT_ONCE
    inside: list[int] = []
    most = [0]
    lock = threading.Lock()
    release = threading.Event()

    def set_up(*, run_id: int) -> None:
        with lock:
            inside.append(run_id)
            most[0] = max(most[0], len(inside))
        release.wait(30)
        with lock:
            inside.remove(run_id)

    monkeypatch.setattr(tasks.execution, "run_execute", set_up)
    threads = [
        threading.Thread(target=tasks._run_execute, args=(run_id,)) for run_id in range(at_once + 3)
    ]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(inside) == at_once, timeout=10, what="the first set-ups")
    # The others wait for a turn: none has started while the first are still going.
    for thread in threads:
        thread.join(0.05)
    assert len(inside) == at_once
    release.set()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert most[0] == at_once
    assert inside == []
