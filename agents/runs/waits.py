"""Pauses in the run store's terms: a held run paused, a paused run put back in the queue,
and a parent run woken by the end of its children.

A run whose ``delegate`` call found its child unfinished pauses as ``awaiting_subagent``
(``agents/services/subagents.py``) only while one of its children is unfinished, checked
under its row lock. Every end of a child (finish, fail, cancel: the portable store's writes,
on PostgreSQL too) locks the parent's row before the child's and, once the child has
ended, queues the parent again if it waits and no other child of it is unfinished. So the
last child's end resumes the parent exactly once, in the transaction that ends the child:
no end is missed (a crash cannot fall between the two) and a second look finds the parent
no longer waiting (docs/architecture.md, "Sub-agents").

Lock order: a parent's row before its child's, everywhere (an end, a Stop, an expiry), so
two of them never wait on each other.
"""

from __future__ import annotations

from django.db.models import Exists, F, OuterRef

from agents.models import AgentRun
from agents.runs.base import RunLost
from agents.runs.queue import run_enqueue_on_commit

Status = AgentRun.Status


def run_lock_held(*, run: AgentRun, worker_id: str) -> AgentRun:
    """Inside the transaction that pauses a run: lock its row, held by ``worker_id`` and
    running; ``RunLost`` otherwise."""
    locked = (
        AgentRun.objects.select_for_update()
        .filter(pk=run.pk, worker_id=worker_id, status=Status.RUNNING)
        .first()
    )
    if locked is None:
        raise RunLost(f"run {run.pk} is no longer held by {worker_id}")
    return locked


def run_pause(*, run: AgentRun, status: str) -> None:
    """Pause (one of ``AgentRun.PAUSED_STATUSES``): no holder and no heartbeat, so neither a
    worker nor the sweeper takes it."""
    AgentRun.objects.filter(pk=run.pk).update(status=status, worker_id="", heartbeat_at=None)
    run.status, run.worker_id, run.heartbeat_at = status, "", None


def run_requeue(*, run_id: int) -> None:
    """Inside the transaction that ended a pause: the run goes back to the queue, for any
    worker, its task enqueued once that commits. The attempt it resumes with is not an
    interruption (``resumes``, which ``AGENT_MAX_ATTEMPTS`` does not count)."""
    AgentRun.objects.filter(pk=run_id).update(
        status=Status.QUEUED, worker_id="", heartbeat_at=None, resumes=F("resumes") + 1
    )
    run_enqueue_on_commit(run_id=run_id)


def run_parent_lock(*, run: AgentRun) -> AgentRun | None:
    """Inside a transaction, before the child's own row is locked: lock the parent's row of
    a child run (None for a run no other run started, or whose parent is gone)."""
    if run.parent_run_id is None:
        return None
    return (
        AgentRun.objects.select_for_update()
        .filter(pk=run.parent_run_id)
        .only("pk", "status")
        .first()
    )


def run_parent_lock_by_id(*, run_id: int) -> None:
    """``run_parent_lock`` for a caller that has only the child's id."""
    parent_id = AgentRun.objects.filter(pk=run_id).values_list("parent_run_id", flat=True).first()
    if parent_id is not None:
        AgentRun.objects.select_for_update().filter(pk=parent_id).values_list("pk").first()


def run_children_unfinished(*, run_id: int) -> bool:
    """Whether any child of the run has not ended (read under the run's row lock)."""
    return (
        AgentRun.objects.filter(parent_run_id=run_id)
        .exclude(status__in=AgentRun.TERMINAL_STATUSES)
        .exists()
    )


def parent_wake(*, parent: AgentRun | None) -> bool:
    """After a child ended, in its transaction, under the parent's row lock: queue the
    parent again if it waits for its children and none is unfinished. Returns whether it
    did."""
    if parent is None or parent.status != Status.AWAITING_SUBAGENT:
        return False
    if run_children_unfinished(run_id=parent.pk):
        return False
    run_requeue(run_id=parent.pk)
    parent.status = Status.QUEUED
    return True


def parents_waiting_in_vain() -> list[int]:
    """Runs that wait for their children while none is unfinished (none exists when every
    end of a child goes through the run store; the sweeper wakes any as a backstop)."""
    unfinished = AgentRun.objects.filter(parent_run_id=OuterRef("pk")).exclude(
        status__in=AgentRun.TERMINAL_STATUSES
    )
    waiting = AgentRun.objects.filter(status=Status.AWAITING_SUBAGENT).exclude(Exists(unfinished))
    return list(waiting.values_list("pk", flat=True))
