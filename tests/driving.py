"""Driving a run in the test's own process, to its end.

The worker's task only hands a run to the process's loop and returns
(``agents.services.execution.run_execute``); a test that asserts what the run stored waits
for its drive to end.
"""

from __future__ import annotations

from agents.models import AgentRun, Notification
from agents.selectors import ended_run_get
from agents.services.execution import run_execute_to_end
from agents.services.notifications import notification_for_run


def run_execute(run_id: int) -> None:
    """What a worker does with the run's task, waited for until the run's drive ends."""
    run_execute_to_end(run_id=run_id)


def notified_at_its_end(run: AgentRun) -> Notification | None:
    """The notification of the run's end as a worker writes it once the drive ended (the
    run's status set by the test), without the end's other effects."""
    ended = ended_run_get(run_id=run.pk)
    assert ended is not None
    return notification_for_run(ended=ended)
