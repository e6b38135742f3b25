"""Handing a run to the workers: its task, by name, once the transaction commits.

By name through the Celery app, so nothing on the services' side imports the tasks module
(which imports the run driver, which imports the services).
"""

from __future__ import annotations

from celery import current_app
from django.db import transaction

RUN_TASK = "agents.run_execute"
TRACE_TASK = "agents.run_trace_export"


def run_enqueue_on_commit(*, run_id: int) -> None:
    """Queue the run's task once the current transaction commits (at once outside one): a
    worker must find the run row it is asked to claim."""
    transaction.on_commit(lambda: run_enqueue(run_id=run_id))


def run_enqueue(*, run_id: int) -> None:
    """Queue the run's task now (the run is committed)."""
    if current_app.conf.task_always_eager:
        # ``send_task`` always goes to the broker; an eager app runs the task here instead,
        # once the project's tasks modules are imported, as a worker imports them at start.
        current_app.loader.import_default_modules()
        current_app.tasks[RUN_TASK].apply(args=[run_id])
        return
    current_app.send_task(RUN_TASK, args=[run_id])


def run_trace_enqueue(*, run_id: int) -> None:
    """Queue the export of an ended run's trace (agents/traces.py), when tracing is on."""
    if current_app.conf.task_always_eager:
        current_app.loader.import_default_modules()
        current_app.tasks[TRACE_TASK].apply(args=[run_id])
        return
    current_app.send_task(TRACE_TASK, args=[run_id])
