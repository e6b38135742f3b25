"""Runs that pause for a person: approval before side effects, and budgets with Continue.

A paused run holds no worker. Its pause is a status (``awaiting_approval`` or
``out_of_budget``) and what it waits on is stored: the exact tool call (a ``ToolApproval`` row
and an ``approval.requested`` event) or the budget it reached (``run.budget_reached``). The
owner's decision or Continue puts the run back in the queue, and the worker that claims it
resumes from its stored steps as after a crash (docs/architecture.md): the engine finds the
decision among its prior steps, runs an approved call once and tells the model about a
declined one. The sweeper ends pauses older than ``CHAT_APPROVAL_EXPIRES_AFTER``: a call
nobody decided as declined (the run goes on), a run stopped at a budget as stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Max, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from agents.models import AgentRun, ToolApproval
from agents.protocol import (
    FrameType,
    RefusalCode,
    RequestRefused,
    approval_decided_payload,
    approval_requested_payload,
    run_budget_reached_payload,
    run_continued_payload,
)
from agents.react.types import ApprovalRequestStep
from agents.runs.log import event_append, events_append
from agents.runs.store import run_mark_cancelled
from agents.runs.waits import (
    run_lock_held,
    run_parent_lock,
    run_parent_lock_by_id,
    run_pause,
    run_requeue,
)
from agents.services.usage import QuotaExceeded, usage_refusal, usage_reserve_again

logger = logging.getLogger(__name__)

Status = AgentRun.Status
Decision = ToolApproval.Decision
REASON_MAX_CHARS = 2000
EXPIRED_REASON = "Nobody approved or denied the call in time."


# --------------------------------------------------------------------------------------
# Pausing (the worker that holds the run)
# --------------------------------------------------------------------------------------


def run_pause_for_approval(
    *, run: AgentRun, requests: Sequence[ApprovalRequestStep], worker_id: str
) -> list[ToolApproval]:
    """Store the calls the run waits on and pause it, in one transaction.

    A request already stored (a resumed run asking again about a call still undecided) is
    not stored twice. Returns the new requests.
    """
    with transaction.atomic():
        run_lock_held(run=run, worker_id=worker_id)
        created = []
        for request in requests:
            approval, is_new = ToolApproval.objects.get_or_create(
                run=run,
                call_id=request.call_id,
                defaults={"tool": request.tool, "tool_input": request.tool_input},
            )
            if is_new:
                created.append(approval)
        run_pause(run=run, status=Status.AWAITING_APPROVAL)
        if created:
            events_append(
                conversation=run.conversation,
                run=run,
                items=[
                    (FrameType.APPROVAL_REQUESTED, approval_requested_payload(approval))
                    for approval in created
                ],
            )
    return created


def run_stop_at_budget(
    *, run: AgentRun, limit: str, message: str, tool: str = "", worker_id: str
) -> None:
    """Stop the run at a budget it reached, until its owner continues it."""
    from agents.profile_snapshot import ProfileSnapshot

    continue_steps = None
    if run.profile_version is not None:
        continue_steps = ProfileSnapshot.from_version(run.profile_version).budget_steps
    with transaction.atomic():
        run_lock_held(run=run, worker_id=worker_id)
        run_pause(run=run, status=Status.OUT_OF_BUDGET)
        event_append(
            conversation=run.conversation,
            run=run,
            type=FrameType.RUN_BUDGET_REACHED,
            payload=run_budget_reached_payload(
                limit=limit, message=message, tool=tool, continue_steps=continue_steps
            ),
        )


# --------------------------------------------------------------------------------------
# Deciding and continuing (the owner, over the socket or the API)
# --------------------------------------------------------------------------------------


def approval_decide(
    *, approval_id: int, user: User, approve: object, reason: object = ""
) -> ToolApproval:
    """The owner approves or denies a paused call; once every call the run waits on is
    decided, the run goes back to the queue.

    Exactly one decision wins (a conditional UPDATE on a still-empty decision); a second
    one, from another tab or a double click, is refused with ``already_decided``. The
    socket and the API pass the client's values as they came: they are checked here.
    """
    if not isinstance(approve, bool):
        raise RequestRefused(RefusalCode.INVALID_FIELD, _("'approve' must be true or false."))
    if not isinstance(reason, str):
        raise RequestRefused(RefusalCode.INVALID_FIELD, _("'reason' must be a string."))
    if len(reason) > REASON_MAX_CHARS:
        raise RequestRefused(
            RefusalCode.TOO_LONG,
            _("The reason is longer than %(limit)s characters.") % {"limit": REASON_MAX_CHARS},
        )
    approval = (
        ToolApproval.objects.select_related("run__conversation")
        .filter(pk=approval_id, run__conversation__owner_id=user.pk)
        .first()
    )
    if approval is None:
        raise RequestRefused(RefusalCode.NOT_FOUND, _("No such approval request."))
    decision = Decision.APPROVED if approve else Decision.DECLINED
    with transaction.atomic():
        # On its own, before the run's row is locked: a Continue takes the locks the
        # other way round.
        _count_against_quota(approval.run, user)
    decided = _decide(approval, decision=decision, reason=reason.strip(), user=user)
    if decided is None:
        approval.refresh_from_db()
        if approval.decision and approval.decision != Decision.CANCELLED:
            raise RequestRefused(
                RefusalCode.ALREADY_DECIDED,
                _("This call was already approved.")
                if approval.decision == Decision.APPROVED
                else _("This call was already declined."),
            )
        raise RequestRefused(RefusalCode.NOT_PAUSED, _("This run is no longer waiting for you."))
    return decided


def _decide(
    approval: ToolApproval, *, decision: str, reason: str, user: User | None
) -> ToolApproval | None:
    """Record one decision and resume the run if nothing else holds it; None if the request
    was decided already or its run no longer waits (cancelled)."""
    run = approval.run
    with transaction.atomic():
        # A child's parent first, as a Stop of the parent and every end of a child lock them
        # (agents/runs/waits.py); then the run row, as a cancel locks it: a decision and a
        # cancel take turns instead of each holding what the other waits for.
        run_parent_lock(run=run)
        locked = AgentRun.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None or locked.status != Status.AWAITING_APPROVAL:
            return None
        now = timezone.now()
        won = ToolApproval.objects.filter(pk=approval.pk, decision=Decision.PENDING).update(
            decision=decision, reason=reason, decided_by=user, decided_at=now
        )
        if not won:
            return None
        approval.decision, approval.reason = decision, reason
        approval.decided_by, approval.decided_at = user, now
        event_append(
            conversation=run.conversation,
            run=run,
            type=FrameType.APPROVAL_DECIDED,
            payload=approval_decided_payload(approval),
        )
        if not run.approvals.filter(decision=Decision.PENDING).exists():
            _requeue(run)
    return approval


def approvals_cancel(*, run: AgentRun, user: User | None) -> list[int]:
    """Close, as ``cancelled``, the requests a run stopped while paused still waited on, so
    the run inspector says the call never ran and nobody decided it. Called in the
    transaction that cancels the run, under its row lock; returns the closed ids."""
    pending = list(run.approvals.filter(decision=Decision.PENDING).values_list("pk", flat=True))
    if pending:
        ToolApproval.objects.filter(pk__in=pending, decision=Decision.PENDING).update(
            decision=Decision.CANCELLED, decided_by=user, decided_at=timezone.now()
        )
    return pending


def run_continue(*, run: AgentRun, user: User) -> AgentRun:
    """The owner's Continue: the run stopped at a budget goes on with its budgets raised
    once more, from its stored steps. A run not stopped at a budget is refused."""
    if run.conversation.owner_id != user.pk:
        raise RequestRefused(RefusalCode.NOT_FOUND, _("No such run."))
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None or locked.status != Status.OUT_OF_BUDGET:
            raise RequestRefused(
                RefusalCode.NOT_PAUSED,
                _("This run is not stopped at a budget; nothing to continue."),
            )
        _count_against_quota(locked, user)
        AgentRun.objects.filter(pk=run.pk).update(budget_grants=F("budget_grants") + 1)
        locked.refresh_from_db(fields=["budget_grants"])
        event_append(
            conversation=run.conversation,
            run=run,
            type=FrameType.RUN_CONTINUED,
            payload=run_continued_payload(
                budget_grants=locked.budget_grants, continued_by=user.get_username()
            ),
        )
        _requeue(run)
    run.refresh_from_db()
    return run


def _count_against_quota(run: AgentRun, user: User) -> None:
    """The owner's decision or Continue sets the model going again, so it counts against
    the daily quota like a send (agents/services/usage.py); refused when nothing is left,
    and the pause stays as it was."""
    try:
        usage_reserve_again(user_id=user.pk, run=run)
    except QuotaExceeded as exceeded:
        raise usage_refusal(exceeded, during_pause=True) from None


def _requeue(run: AgentRun) -> None:
    """Inside the transaction that ended the pause: back to the queue, for any worker."""
    run_requeue(run_id=run.pk)


# --------------------------------------------------------------------------------------
# Expiry (the sweeper)
# --------------------------------------------------------------------------------------


def approvals_expire(*, now: datetime | None = None) -> list[int]:
    """Decline, as expired, every request older than ``CHAT_APPROVAL_EXPIRES_AFTER`` whose
    run still waits; their runs go on (the model reads that nobody approved). Returns the
    ids of the requests it expired."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.CHAT_APPROVAL_EXPIRES_AFTER)
    stale = ToolApproval.objects.filter(
        decision=Decision.PENDING,
        requested_at__lt=cutoff,
        run__status=Status.AWAITING_APPROVAL,
    ).select_related("run__conversation")
    expired = []
    for approval in [*stale, *_scheduled_past_their_expiry(now or timezone.now(), cutoff)]:
        if _decide(approval, decision=Decision.EXPIRED, reason=EXPIRED_REASON, user=None):
            expired.append(approval.pk)
    if expired:
        logger.info("expired approval requests %s", expired)
    return expired


def _scheduled_past_their_expiry(now: datetime, cutoff: datetime) -> list[ToolApproval]:
    """Requests of scheduled runs whose schedule sets a sooner expiry, and that passed it
    (those past the site's own are in the caller's list already)."""
    waiting = ToolApproval.objects.filter(
        decision=Decision.PENDING,
        requested_at__gte=cutoff,
        run__status=Status.AWAITING_APPROVAL,
        run__firing__schedule__approval_expires_after__isnull=False,
    ).select_related("run__conversation", "run__firing__schedule")
    return [
        approval
        for approval in waiting
        if approval.requested_at
        < now - timedelta(seconds=approval.run.firing.schedule.approval_expires_after or 0)
    ]


def budget_pauses_expire(*, now: datetime | None = None) -> list[int]:
    """Stop every run that has waited at a budget for longer than
    ``CHAT_APPROVAL_EXPIRES_AFTER``, as its owner's Stop would (``run.cancelled``): its
    quota reservation goes back and its conversation is no longer blocked by a pause
    nobody will continue. Returns the ids of the runs it stopped."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.CHAT_APPROVAL_EXPIRES_AFTER)
    stale = (
        AgentRun.objects.filter(status=Status.OUT_OF_BUDGET)
        .annotate(
            stopped_at=Max(
                "events__created_at", filter=Q(events__type=FrameType.RUN_BUDGET_REACHED)
            )
        )
        .filter(stopped_at__lt=cutoff)
        .values_list("pk", flat=True)
    )
    stopped = []
    for run_id in stale:
        with transaction.atomic():
            # A child's parent first, as every end of a child locks them (its end may
            # resume the parent: agents/runs/waits.py).
            run_parent_lock_by_id(run_id=run_id)
            # A Continue may have got there first: only a run still stopped at its budget.
            locked = (
                AgentRun.objects.select_for_update()
                .select_related("conversation")
                .filter(pk=run_id, status=Status.OUT_OF_BUDGET)
                .first()
            )
            if locked is not None and run_mark_cancelled(run=locked, partial_answer=""):
                stopped.append(run_id)
    if stopped:
        logger.info("stopped runs that waited at a budget too long %s", stopped)
    return stopped
