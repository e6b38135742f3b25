"""What a run has stored, read back: for resuming it, and for the log."""

from __future__ import annotations

from typing import Any

from agents.models import AgentRun
from agents.protocol import FrameType
from agents.react.types import (
    ApprovalDecisionStep,
    ApprovalRequestStep,
    FinalAnswerStep,
    ModelCallRecord,
    Step,
    step_from_event,
)
from agents.runs.portable import stale_before


def run_stored_steps(*, run: AgentRun) -> list[dict[str, Any]]:
    """The payloads of the steps already stored for this run, in order (for resuming)."""
    # Approval requests and decisions are steps to the engine too (agents/services/approvals.py).
    kinds = (FrameType.STEP, FrameType.APPROVAL_REQUESTED, FrameType.APPROVAL_DECIDED)
    return list(run.events.filter(type__in=kinds).order_by("seq").values_list("payload", flat=True))


def run_numbered_steps(*, run: AgentRun) -> list[tuple[int, Step]]:
    """The run's stored steps with their ``seq``, in order (the steps a page can point at)."""
    kinds = (FrameType.STEP, FrameType.APPROVAL_REQUESTED, FrameType.APPROVAL_DECIDED)
    rows = run.events.filter(type__in=kinds).order_by("seq").values_list("seq", "payload")
    return [(seq, step_from_event(payload)) for seq, payload in rows]


def run_fork_reused_steps(*, run: AgentRun) -> list[Step]:
    """What a fork starts with: the steps its original stored before the fork's point (no
    model calls: the fork's own are counted from its first). Empty for any other run, and
    for a fork whose original is gone."""
    if run.forked_from_id is None or run.fork_before_seq is None:
        return []
    original = AgentRun.objects.filter(pk=run.forked_from_id).first()
    if original is None:
        return []
    return [
        step
        for seq, step in run_numbered_steps(run=original)
        # Every reused call has its observation: what was asked and decided is not needed.
        if seq < run.fork_before_seq
        and not isinstance(step, ApprovalRequestStep | ApprovalDecisionStep)
    ]


def run_prior_steps(*, run: AgentRun) -> list[Step]:
    """What a resumed attempt hands the engine: its model calls (for the iteration count and
    token totals; their prompts are left out) followed by the stored steps, in order."""
    calls = run.model_calls.order_by("index").defer("request_messages")
    records: list[Step] = [
        ModelCallRecord(
            index=call.index,
            messages=[],
            options=call.request_options,
            response_text=call.response_text,
            tool_calls=call.response_tool_calls,
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
            duration_ms=call.duration_ms,
            error=call.error,
        )
        for call in calls
    ]
    return records + [step_from_event(payload) for payload in run_stored_steps(run=run)]


def run_log_steps(*, run: AgentRun) -> list[Step]:
    """Everything a run stored, as the engine's steps: ``run_prior_steps`` and, for a run
    that ended with its answer, the ``FinalAnswerStep`` (stored as ``run.finished``, with
    the run's tokens and time). For reading a run back whole: comparisons, traces."""
    steps = run_prior_steps(run=run)
    finished = run.events.filter(type=FrameType.RUN_FINISHED).order_by("-seq").first()
    if finished is not None:
        payload = finished.payload
        duration = run.duration_seconds
        steps.append(
            FinalAnswerStep(
                text=payload["message"]["content"],
                stop_reason=payload.get("stop_reason", "answer"),
                prompt_tokens=run.prompt_tokens,
                completion_tokens=run.completion_tokens,
                duration_ms=int(duration * 1000) if duration is not None else 0,
            )
        )
    return steps


def run_claim_refusal(*, run_id: int) -> str:
    """Why a claim took nothing, for the log: the run's state as it is now."""
    row = (
        AgentRun.objects.filter(pk=run_id)
        .values("status", "worker_id", "heartbeat_at", "attempts")
        .first()
    )
    if row is None:
        return "no such run (deleted, or not committed yet)"
    fresh = row["heartbeat_at"] is not None and row["heartbeat_at"] >= stale_before()
    return (
        f"status {row['status']}, holder {row['worker_id'] or '-'}, "
        f"heartbeat {'fresh' if fresh else 'stale or none'}, attempts {row['attempts']}"
    )
