"""The run store, chosen once, and the writes of a run's life as services.

``run_store()`` is the store of this database: the PostgreSQL statements where
``fenced_statements_supported()``, else the portable ORM. The run driver
(``agents/services/execution.py``) awaits its ``a``-prefixed methods on the process's loop;
every other caller (approvals, conversations, the admin, tests) calls the functions below,
which are the same implementation.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from agents.db.statements import fenced_statements_supported
from agents.models import AgentRun, Message, RunEvent
from agents.react.types import FinalAnswerStep, ModelCallRecord, Step
from agents.runs.base import Claim, RunLost, RunStore
from agents.runs.portable import ACTIVE_STATUSES, PortableRunStore
from agents.runs.postgres import PostgresRunStore

__all__ = [
    "ACTIVE_STATUSES",
    "Claim",
    "RunLost",
    "RunStore",
    "run_claim",
    "run_claim_with_tools",
    "run_fail",
    "run_finish",
    "run_heartbeat",
    "run_mark_cancelled",
    "run_record_model_call",
    "run_record_step",
    "run_record_steps",
    "run_started",
    "run_store",
    "runs_cancel_requested",
    "runs_needing_rescue",
    "runs_release",
]


@functools.cache
def run_store() -> RunStore:
    """This database's run store (the capability is fixed for the process)."""
    return PostgresRunStore() if fenced_statements_supported() else PortableRunStore()


def run_claim(*, run_id: int, worker_id: str) -> AgentRun | None:
    """Take the run for this worker, or None if it ended or a live worker holds it."""
    claim = run_store().claim(run_id=run_id, worker_id=worker_id, announce=False)
    return claim.run if claim is not None else None


def run_claim_with_tools(*, run_id: int, worker_id: str, announce: bool) -> Claim | None:
    return run_store().claim(run_id=run_id, worker_id=worker_id, announce=announce)


def run_started(
    *, run: AgentRun, model: str, profile: str, worker_id: str | None = None
) -> RunEvent:
    return run_store().start(run=run, model=model, profile=profile, worker_id=worker_id)


def run_record_steps(
    *, run: AgentRun, steps: Sequence[Step], worker_id: str | None = None
) -> list[RunEvent]:
    return run_store().record(run=run, steps=steps, worker_id=worker_id)


def run_record_step(*, run: AgentRun, step: Step, worker_id: str | None = None) -> RunEvent:
    """Store a thought / action / observation / error step as a ``step`` event."""
    return run_store().record(run=run, steps=[step], worker_id=worker_id)[0]


def run_record_model_call(
    *, run: AgentRun, record: ModelCallRecord, worker_id: str | None = None
) -> None:
    """Store one model request and response (not an event) and add its tokens to the run."""
    run_store().record(run=run, steps=[record], worker_id=worker_id)


def run_finish(
    *,
    run: AgentRun,
    step: FinalAnswerStep,
    worker_id: str | None = None,
    preceding: Sequence[Step] = (),
) -> Message | None:
    return run_store().finish(run=run, step=step, worker_id=worker_id, preceding=preceding)


def run_fail(
    *, run: AgentRun, code: str, message: str, detail: str = "", worker_id: str | None = None
) -> bool:
    return run_store().fail(run=run, code=code, message=message, detail=detail, worker_id=worker_id)


def run_mark_cancelled(
    *, run: AgentRun, partial_answer: str = "", worker_id: str | None = None
) -> bool:
    return run_store().cancel(run=run, partial_answer=partial_answer, worker_id=worker_id)


def run_heartbeat(*, run_ids: list[int], worker_id: str) -> set[int]:
    return run_store().heartbeat(run_ids=run_ids, worker_id=worker_id)


def runs_release(*, run_ids: list[int], worker_id: str) -> list[int]:
    return run_store().release(run_ids=run_ids, worker_id=worker_id)


def runs_cancel_requested(*, run_ids: list[int]) -> set[int]:
    return run_store().cancel_requested(run_ids=run_ids)


def runs_needing_rescue(*, queued_for_seconds: float) -> list[int]:
    return run_store().needing_rescue(queued_for_seconds=queued_for_seconds)
