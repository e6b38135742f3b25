"""Handing a run to the workers (agents/runs/queue.py): by the task's name, after commit."""

from __future__ import annotations

import pytest
from celery import current_app

from agents.runs.queue import RUN_TASK, run_enqueue_on_commit


@pytest.mark.django_db
def test_the_runs_task_is_queued_by_name_once_the_transaction_commits(
    monkeypatch, django_capture_on_commit_callbacks
):
    sent: list[tuple[str, list[int]]] = []
    monkeypatch.setattr(current_app.conf, "task_always_eager", False)
    monkeypatch.setattr(current_app, "send_task", lambda name, args: sent.append((name, args)))

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_enqueue_on_commit(run_id=42)
    assert sent == []  # not before the commit

    for callback in callbacks:
        callback()
    assert sent == [("agents.run_execute", [42])]


def test_the_name_is_the_tasks_own():
    from agents import tasks

    current_app.loader.import_default_modules()
    assert current_app.tasks[RUN_TASK].run is tasks.run_execute.run
