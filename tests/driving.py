"""Driving a run in the test's own process, to its end.

The worker's task only hands a run to the process's loop and returns
(``agents.services.execution.run_execute``); a test that asserts what the run stored waits
for its drive to end.
"""

from __future__ import annotations

from agents.services.execution import run_execute_to_end


def run_execute(run_id: int) -> None:
    """What a worker does with the run's task, waited for until the run's drive ends."""
    run_execute_to_end(run_id=run_id)
