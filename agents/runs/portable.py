"""The run store through the ORM: any database Django supports (SQLite, the embedded
default; PostgreSQL too, where the contract tests run it beside ``postgres.py``).

The fence is a row lock: each fenced write first locks the run's row where the worker still
holds it (``_check_holder``, or the token UPDATE filtered on the holder), so a takeover's
claim waits for it and every later write of the old holder is refused.

Every end of a child run comes here, on PostgreSQL too: it locks the parent's row first and
queues the parent again if the child was the last it waited for (``agents/runs/waits.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents.attachments.selectors import attachments_any_ready
from agents.models import AgentRun, Conversation, Message, ModelCall, RunEvent
from agents.protocol import (
    FrameType,
    run_cancelled_payload,
    run_failed_payload,
    run_finished_payload,
)
from agents.react.types import FinalAnswerStep, ModelCallRecord, Step
from agents.runs.base import (
    Claim,
    RunLost,
    RunStore,
    StartInputs,
    call_records,
    started_payload,
    step_items,
)
from agents.runs.log import event_append, events_append
from agents.runs.waits import parent_wake, run_parent_lock
from agents.selectors import custom_instructions_of, firing_budget_steps
from agents.services.usage import usage_record_run_tokens

Status = AgentRun.Status
ACTIVE_STATUSES = AgentRun.ACTIVE_STATUSES

# What a claimed run starts with, read with it. The run's endpoint is its version's, so
# ``build_executor`` need not read it again.
CLAIM_READS = ("conversation__owner", "trigger_message", "profile_version", "model_config")


def stale_before() -> Any:
    """Heartbeats older than this are stale: their worker is taken for gone."""
    return timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_STALE_SECONDS)


def start_inputs(run: AgentRun) -> StartInputs:
    """A run's ``StartInputs``, each from its selector."""
    return StartInputs(
        firing_budget_steps=firing_budget_steps(run_id=run.pk),
        owner_instructions=custom_instructions_of(user_id=run.conversation.owner_id),
        has_ready_files=attachments_any_ready(conversation_id=run.conversation_id),
    )


class _StoredCalls(NamedTuple):
    first_index: int
    call_count: int
    prompt_tokens: int
    completion_tokens: int


class PortableRunStore(RunStore):
    def claim(self, *, run_id: int, worker_id: str, announce: bool) -> Claim | None:
        # ``announce`` is the driver's to do here: it calls ``start`` after the claim.
        now = timezone.now()
        claimed = (
            AgentRun.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES)
            .filter(Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale_before()))
            .update(
                status=Status.RUNNING,
                worker_id=worker_id,
                heartbeat_at=now,
                attempts=F("attempts") + 1,
                # The first attempt's claim is when the run started; later ones keep it.
                started_at=Coalesce(F("started_at"), Value(now)),
            )
        )
        if not claimed:
            return None
        run = AgentRun.objects.select_related(*CLAIM_READS).get(pk=run_id)
        return Claim(run, None, start_inputs(run))

    def start(
        self, *, run: AgentRun, model: str, profile: str, worker_id: str | None = None
    ) -> RunEvent:
        with transaction.atomic():
            _check_holder(run, worker_id)
            return event_append(
                conversation=run.conversation,
                run=run,
                type=FrameType.RUN_STARTED,
                payload=started_payload(run, model, profile),
            )

    def record(
        self, *, run: AgentRun, steps: Sequence[Step], worker_id: str | None = None
    ) -> list[RunEvent]:
        records = call_records(steps)
        calls = None
        with transaction.atomic():
            if records:
                calls = _store_model_calls(run, records, worker_id)
            else:
                _check_holder(run, worker_id)
            items = step_items(steps)
            stored = (
                events_append(conversation=run.conversation, run=run, items=items) if items else []
            )
        if calls is not None:
            _remember_calls(run, calls, worker_id)
        return stored

    def finish(
        self,
        *,
        run: AgentRun,
        step: FinalAnswerStep,
        worker_id: str | None = None,
        preceding: Sequence[Step] = (),
    ) -> Message | None:
        records = call_records(preceding)
        with transaction.atomic():
            parent = run_parent_lock(run=run)
            locked = _lock_active(run, worker_id)
            if locked is None:
                return None
            if records:
                calls = _store_model_calls(run, records, worker_id)
                locked.prompt_tokens += calls.prompt_tokens
                locked.completion_tokens += calls.completion_tokens
            # A child run's answer is its parent's observation, not a message of the chat.
            message = None if run.is_child else _save_answer(run, step.text)
            _end(run, locked, Status.SUCCEEDED)
            finished = run_finished_payload(
                run=run, message=message, stop_reason=step.stop_reason, answer=step.text
            )
            events_append(
                conversation=run.conversation,
                run=run,
                items=[*step_items(preceding), (FrameType.RUN_FINISHED, finished)],
            )
            parent_wake(parent=parent)
        return message

    def fail(
        self,
        *,
        run: AgentRun,
        code: str,
        message: str,
        detail: str = "",
        worker_id: str | None = None,
    ) -> bool:
        with transaction.atomic():
            parent = run_parent_lock(run=run)
            locked = _lock_active(run, worker_id)
            if locked is None:
                return False
            _end(
                run,
                locked,
                Status.FAILED,
                error_code=code[:64],
                error_message=message,
                error_detail=detail,
            )
            event_append(
                conversation=run.conversation,
                run=run,
                type=FrameType.RUN_FAILED,
                payload=run_failed_payload(code=code, message=message),
            )
            parent_wake(parent=parent)
        return True

    def cancel(
        self, *, run: AgentRun, partial_answer: str = "", worker_id: str | None = None
    ) -> bool:
        with transaction.atomic():
            parent = run_parent_lock(run=run)
            locked = _lock_active(run, worker_id)
            if locked is None:
                return False
            keep = partial_answer.strip() and not run.is_child
            message = _save_answer(run, partial_answer) if keep else None
            _end(run, locked, Status.CANCELLED)
            event_append(
                conversation=run.conversation,
                run=run,
                type=FrameType.RUN_CANCELLED,
                payload=run_cancelled_payload(partial_answer=partial_answer, message=message),
            )
            parent_wake(parent=parent)
        return True

    def heartbeat(self, *, run_ids: list[int], worker_id: str) -> set[int]:
        if not run_ids:
            return set()
        held = AgentRun.objects.filter(pk__in=run_ids, worker_id=worker_id, status=Status.RUNNING)
        ids = set(held.values_list("pk", flat=True))
        AgentRun.objects.filter(pk__in=ids, worker_id=worker_id).update(heartbeat_at=timezone.now())
        return ids

    def release(self, *, run_ids: list[int], worker_id: str) -> list[int]:
        if not run_ids:
            return []
        # Each row is locked as a step's write locks it (see the module's docstring).
        with transaction.atomic():
            held = list(
                AgentRun.objects.select_for_update()
                .filter(pk__in=run_ids, worker_id=worker_id, status=Status.RUNNING)
                .values_list("pk", flat=True)
            )
            AgentRun.objects.filter(pk__in=held).update(worker_id="", heartbeat_at=None)
        return held

    def cancel_requested(self, *, run_ids: list[int]) -> set[int]:
        if not run_ids:
            return set()
        return set(
            AgentRun.objects.filter(pk__in=run_ids, cancel_requested_at__isnull=False).values_list(
                "pk", flat=True
            )
        )

    def needing_rescue(self, *, queued_for_seconds: float) -> list[int]:
        # A queued run this old most likely lost its broker message; enqueuing it again is
        # safe because claiming is conditional.
        queued_before = timezone.now() - timedelta(seconds=queued_for_seconds)
        no_fresh_beat = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale_before())
        stale = Q(status=Status.RUNNING) & no_fresh_beat
        lost = Q(status=Status.QUEUED, created_at__lt=queued_before) & no_fresh_beat
        runs = AgentRun.objects.filter(stale | lost).order_by("pk")
        return list(runs.values_list("pk", flat=True))


def _check_holder(run: AgentRun, worker_id: str | None) -> None:
    """Inside a transaction: lock the run row and make sure ``worker_id`` still holds it.

    A takeover (a claim) updates the same row, so it waits for a step being written and
    reads it as a prior step, and every write the old holder tries after it is refused: two
    workers never both extend one run's log. ``None`` skips the check (not a worker).
    """
    if worker_id is None:
        return
    held = (
        AgentRun.objects.select_for_update()
        .filter(pk=run.pk, worker_id=worker_id, status=Status.RUNNING)
        .values_list("pk", flat=True)
        .first()
    )
    if held is None:
        raise RunLost(f"run {run.pk} is no longer held by {worker_id}")


def _store_model_calls(
    run: AgentRun, records: Sequence[ModelCallRecord], worker_id: str | None
) -> _StoredCalls:
    """Insert the calls and add their tokens to the run and its ledger entry.

    The token UPDATE, filtered on the holder, is also the holder check: it locks the run row
    only if this worker still holds the run, as ``_check_holder`` does, in one statement.
    """
    prompt = sum(record.prompt_tokens for record in records)
    completion = sum(record.completion_tokens for record in records)
    held = AgentRun.objects.filter(pk=run.pk)
    if worker_id is not None:
        held = held.filter(worker_id=worker_id, status=Status.RUNNING)
    updated = held.update(
        prompt_tokens=F("prompt_tokens") + prompt,
        completion_tokens=F("completion_tokens") + completion,
    )
    if not updated and worker_id is not None:
        raise RunLost(f"run {run.pk} is no longer held by {worker_id}")
    usage_record_run_tokens(run=run, prompt_tokens=prompt, completion_tokens=completion)
    first = _next_call_index(run, worker_id)
    ModelCall.objects.bulk_create(
        ModelCall(
            run=run,
            index=first + offset,
            request_messages=record.messages,
            request_options=record.options,
            response_text=record.response_text,
            response_tool_calls=record.tool_calls,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            duration_ms=record.duration_ms,
            error=record.error,
        )
        for offset, record in enumerate(records)
    )
    return _StoredCalls(first, len(records), prompt, completion)


def _remember_calls(run: AgentRun, calls: _StoredCalls, worker_id: str | None) -> None:
    """Once committed: what the stored calls changed, on the caller's copy of the run."""
    if worker_id is not None:
        # A cache on this worker's copy of the row, not a field.
        run._next_call_index = calls.first_index + calls.call_count  # type: ignore[attr-defined]
    run.prompt_tokens += calls.prompt_tokens
    run.completion_tokens += calls.completion_tokens


def _next_call_index(run: AgentRun, worker_id: str | None) -> int:
    """The index of the run's next model call.

    A resumed attempt numbers its calls from zero again, so the first call of an attempt
    continues from the stored ones. After that the holder is the only writer of the run's
    calls (fenced above), so it counts on: one query per attempt rather than per call.
    """
    if worker_id is not None and getattr(run, "_next_call_index", None) is not None:
        return int(run._next_call_index)  # type: ignore[attr-defined]
    last = run.model_calls.aggregate(last=Max("index"))["last"]
    return 0 if last is None else last + 1


def _lock_active(run: AgentRun, worker_id: str | None) -> AgentRun | None:
    """Lock the run row; None if it already ended (a cancel or another worker got there),
    was deleted with its conversation, or another worker holds it now."""
    locked = AgentRun.objects.select_for_update().filter(pk=run.pk).first()
    if locked is None or locked.is_terminal:
        return None
    if worker_id is not None and locked.worker_id != worker_id:
        return None
    return locked


def _save_answer(run: AgentRun, text: str) -> Message:
    message = Message.objects.create(
        conversation_id=run.conversation_id,
        role=Message.Role.ASSISTANT,
        content=text,
        run=run,
        parent_id=run.trigger_message_id,
    )
    _answer_take_place(run, message)
    return message


def _answer_take_place(run: AgentRun, message: Message) -> None:
    """The answer is a child of its question. It ends the active branch if the owner still
    looks at that question; if they switched to another branch meanwhile, it waits as a
    sibling version (agents/services/branches.py)."""
    moved = Conversation.objects.filter(
        pk=run.conversation_id, active_leaf_id=run.trigger_message_id
    ).update(active_leaf_id=message.pk)
    if not moved:
        Message.objects.filter(pk=message.pk).update(on_active_branch=False)
        message.on_active_branch = False


def _end(run: AgentRun, locked: AgentRun, status: str, **fields: Any) -> None:
    now = timezone.now()
    fields.update(status=status, finished_at=now, heartbeat_at=None)
    AgentRun.objects.filter(pk=run.pk).update(**fields)
    for name, value in fields.items():
        setattr(run, name, value)
    run.prompt_tokens = locked.prompt_tokens
    run.completion_tokens = locked.completion_tokens
