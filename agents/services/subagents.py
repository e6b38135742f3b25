"""Sub-agents: a run's ``delegate`` tool call starts a child run of another profile.

A child is a real run in its parent's conversation (its own prompt version, model, tools,
stored steps, crash recovery), linked to the parent run and to the call that started it.
It writes no message of its own: its answer is the parent's observation
(docs/architecture.md, "Sub-agents").

While a child works, its parent holds no worker: the ``delegate`` call suspends the parent's
run, which pauses as ``awaiting_subagent`` (``run_wait_for_children``); the end of its last
unfinished child queues it again (``agents/runs/waits.py``), and the call, run again, reads
the child's answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from agents.llm.factory import model_name_for
from agents.models import AgentProfile, AgentRun, RunEvent
from agents.profile_snapshot import ProfileSnapshot, snapshot_model_config
from agents.protocol import FrameType, run_waiting_payload
from agents.runs.log import event_append
from agents.runs.queue import run_enqueue_on_commit
from agents.runs.waits import (
    parent_wake,
    parents_waiting_in_vain,
    run_children_unfinished,
    run_lock_held,
    run_pause,
    run_requeue,
)
from agents.selectors import profiles_for_user
from agents.services.conversations import run_cancel
from agents.services.prompt_versions import prompt_version_ensure


class DelegationRefused(Exception):
    """The child cannot start; the message is the parent's error observation."""


@dataclass(frozen=True)
class ChildOutcome:
    """Where a child run stands, as its parent's waiting call reads it."""

    status: str
    answer: str = ""
    error: str = ""

    @property
    def ended(self) -> bool:
        return self.status in AgentRun.TERMINAL_STATUSES


def delegation_max_depth() -> int:
    return int(settings.AGENT_DELEGATION_MAX_DEPTH)


def child_run_start(*, parent_run_id: int, call_id: str, profile_slug: str, task: str) -> AgentRun:
    """The child run of the parent's call ``call_id``: the one already started for that call
    (a parent resumed after a crash waits for it), or a new queued one.

    Its step limit is what the parent has left (the parent's own limit less the model calls
    it stored); its depth is one more than the parent's. Raises ``DelegationRefused``.
    """
    existing = AgentRun.objects.filter(parent_run_id=parent_run_id, parent_call_id=call_id).first()
    if existing is not None:
        return existing
    if not task.strip():
        raise DelegationRefused(_("The task is empty."))
    parent = AgentRun.objects.select_related("conversation__owner", "profile_version").get(
        pk=parent_run_id
    )
    if parent.depth + 1 > delegation_max_depth():
        raise DelegationRefused(_("Sub-agents may not delegate any deeper."))
    owner = parent.conversation.owner
    profile = profiles_for_user(user=owner).filter(slug=profile_slug).first()
    if profile is None:
        raise DelegationRefused(
            _("No agent profile %(slug)s is available.") % {"slug": profile_slug}
        )
    steps_left = _steps_left(parent)
    if steps_left < 1:
        raise DelegationRefused(_("No steps are left for a sub-agent."))
    try:
        with transaction.atomic():
            child = _new_child(parent, profile, call_id, task, steps_left)
    except IntegrityError:
        # The same call started it meanwhile (a run taken over by another worker).
        return AgentRun.objects.get(parent_run_id=parent_run_id, parent_call_id=call_id)
    return child


def _new_child(
    parent: AgentRun, profile: AgentProfile, call_id: str, task: str, steps_left: int
) -> AgentRun:
    version = prompt_version_ensure(profile=profile)
    snapshot = ProfileSnapshot.from_version(version)
    model_config = snapshot_model_config(snapshot)
    child = AgentRun.objects.create(
        conversation_id=parent.conversation_id,
        trigger_message_id=parent.trigger_message_id,
        profile_version=version,
        model_config=model_config,
        model_name=model_name_for(model_config),
        mode=snapshot.mode,
        parent_run=parent,
        parent_call_id=call_id,
        task=task,
        depth=parent.depth + 1,
        max_steps=min(snapshot.max_iterations, steps_left),
    )
    run_enqueue_on_commit(run_id=child.pk)
    return child


def _steps_left(parent: AgentRun) -> int:
    """What is left of the parent's step limit: the limit it was given (a child's), else its
    profile's ``max_iterations``, less the model calls it has stored."""
    if parent.max_steps is not None:
        limit = parent.max_steps
    elif parent.profile_version is not None:
        limit = ProfileSnapshot.from_version(parent.profile_version).max_iterations
    else:
        return 0
    return limit - parent.model_calls.count()


def child_run_outcome(*, run_id: int) -> ChildOutcome:
    """The child's status, and once it ended its answer or why it gave none. One statement
    while it runs."""
    status, error_message = (
        AgentRun.objects.filter(pk=run_id).values_list("status", "error_message").get()
    )
    if status == AgentRun.Status.SUCCEEDED:
        finished = (
            RunEvent.objects.filter(run_id=run_id, type=FrameType.RUN_FINISHED)
            .order_by("-seq")
            .values_list("payload", flat=True)
            .first()
        )
        return ChildOutcome(status=status, answer=str((finished or {}).get("answer", "")))
    if status == AgentRun.Status.FAILED:
        return ChildOutcome(status=status, error=error_message or _("The sub-agent failed."))
    if status == AgentRun.Status.CANCELLED:
        return ChildOutcome(status=status, error=_("The sub-agent was stopped."))
    return ChildOutcome(status=status)


def child_runs_stop_after(*, parent_run_id: int) -> int:
    """Stop, as the owner's Stop would, the unfinished children of a parent that ended:
    nothing waits for their answers any more (a parent that failed at its hard limit, say).
    Returns how many were stopped; none while the parent goes on or is paused."""
    parent = AgentRun.objects.select_related("conversation__owner").filter(pk=parent_run_id).first()
    if parent is None or not parent.is_terminal:
        return 0
    children = AgentRun.objects.filter(parent_run_id=parent_run_id).exclude(
        status__in=AgentRun.TERMINAL_STATUSES
    )
    stopped = 0
    for child in children.select_related("conversation"):
        run_cancel(run=child, user=parent.conversation.owner)
        stopped += 1
    return stopped


class ChildMissing(Exception):
    """A suspended delegate call with no child run: nothing would ever wake its parent."""


def run_wait_for_children(*, run: AgentRun, call_ids: list[str], worker_id: str) -> bool:
    """Pause the run, which the worker holds, until its children have ended: the calls
    ``call_ids`` (each a ``delegate`` call whose child had not ended) wait for them.

    Under the run's row lock, which every end of a child takes first: if no child of the run
    is unfinished any more (the last ended since the call looked), the run is queued again
    at once instead, so no end goes unseen. Returns whether the run paused.
    """
    with transaction.atomic():
        run_lock_held(run=run, worker_id=worker_id)
        children = dict(
            AgentRun.objects.filter(parent_run_id=run.pk, parent_call_id__in=call_ids).values_list(
                "parent_call_id", "pk"
            )
        )
        missing = sorted(set(call_ids) - set(children))
        if missing:
            raise ChildMissing(f"run {run.pk}: calls {missing} suspended with no child run")
        if not run_children_unfinished(run_id=run.pk):
            run_requeue(run_id=run.pk)
            return False
        run_pause(run=run, status=AgentRun.Status.AWAITING_SUBAGENT)
        event_append(
            conversation=run.conversation,
            run=run,
            type=FrameType.RUN_WAITING,
            payload=run_waiting_payload(
                call_ids=list(call_ids), child_run_ids=[children[call] for call in call_ids]
            ),
        )
    return True


def subagent_waits_repair() -> list[int]:
    """Queue again every run that waits for its children while none is unfinished. Every
    end of a child wakes its parent in the same transaction, so the sweeper finds none;
    it looks anyway, so that no run could wait forever. Returns the ids it queued."""
    woken = []
    for run_id in parents_waiting_in_vain():
        with transaction.atomic():
            parent = (
                AgentRun.objects.select_for_update().filter(pk=run_id).only("pk", "status").first()
            )
            if parent_wake(parent=parent):
                woken.append(run_id)
    return woken
