"""A parent run paused while its sub-agents work (``awaiting_subagent``), against the
database: the pause holds no worker, the end of the last child queues the parent exactly
once whichever way the child ends (and however often that end is looked at), a child that
ended before the pause never leaves the parent waiting, and Stop ends both. The worker's
side is in tests/integration/test_subagents.py."""

from __future__ import annotations

import pytest

from agents.models import AgentRun, RunEvent
from agents.protocol import FrameType
from agents.react.types import FinalAnswerStep
from agents.runs.base import RunLost
from agents.runs.store import (
    run_claim,
    run_fail,
    run_finish,
    run_mark_cancelled,
    runs_needing_rescue,
)
from agents.services.conversations import run_cancel
from agents.services.subagents import (
    ChildMissing,
    child_run_start,
    run_wait_for_children,
    subagent_waits_repair,
)

pytestmark = pytest.mark.django_db


def _child(parent: AgentRun, call_id: str = "call-1") -> AgentRun:
    return child_run_start(
        parent_run_id=parent.pk, call_id=call_id, profile_slug="helper", task="Look it up"
    )


def _paused(parent: AgentRun, *call_ids: str) -> bool:
    return run_wait_for_children(run=parent, call_ids=list(call_ids), worker_id=parent.worker_id)


def _answer(child: AgentRun, text: str = "It is 42.") -> None:
    child.refresh_from_db()
    run_finish(run=child, step=FinalAnswerStep(text=text, stop_reason="answer"))


def test_the_parent_pauses_holding_no_worker_and_says_what_it_waits_for(parent, helper):
    child = _child(parent)

    assert _paused(parent, "call-1")

    parent.refresh_from_db()
    assert parent.status == AgentRun.Status.AWAITING_SUBAGENT
    assert parent.status in AgentRun.PAUSED_STATUSES
    assert (parent.worker_id, parent.heartbeat_at) == ("", None)
    waiting = RunEvent.objects.get(run=parent, type=FrameType.RUN_WAITING)
    assert waiting.payload == {
        "waiting_for": "subagents",
        "call_ids": ["call-1"],
        "child_run_ids": [child.pk],
    }
    # Neither a claim nor the sweeper takes a paused run.
    assert run_claim(run_id=parent.pk, worker_id="worker:2") is None
    assert parent.pk not in runs_needing_rescue(queued_for_seconds=0)


def test_only_the_holder_pauses_the_run(parent, helper):
    _child(parent)
    with pytest.raises(RunLost):
        run_wait_for_children(run=parent, call_ids=["call-1"], worker_id="someone:else")
    parent.refresh_from_db()
    assert parent.status == AgentRun.Status.RUNNING


def test_a_suspended_call_without_a_child_is_an_error_not_a_wait_forever(parent):
    with pytest.raises(ChildMissing):
        _paused(parent, "call-9")
    parent.refresh_from_db()
    assert parent.status == AgentRun.Status.RUNNING


@pytest.mark.parametrize("ending", ["finished", "failed", "cancelled", "stopped"])
def test_the_childs_end_queues_the_parent_once(parent, helper, user, ending):
    child = _child(parent)
    _paused(parent, "call-1")

    child.refresh_from_db()
    if ending == "finished":
        _answer(child)
    elif ending == "failed":
        run_fail(run=child, code="run_timeout", message="Too long.")
    elif ending == "cancelled":
        run_mark_cancelled(run=child)
    else:
        run_cancel(run=child, user=user)  # the owner's Stop on the child alone

    parent.refresh_from_db()
    assert parent.status == AgentRun.Status.QUEUED
    assert (parent.resumes, parent.worker_id, parent.heartbeat_at) == (1, "", None)

    # The same end looked at again, by the store or the sweeper, resumes nothing more.
    child.refresh_from_db()
    assert not run_fail(run=child, code="again", message="Again.")
    assert not run_mark_cancelled(run=child)
    assert subagent_waits_repair() == []
    parent.refresh_from_db()
    assert (parent.status, parent.resumes) == (AgentRun.Status.QUEUED, 1)


def test_a_child_that_ended_before_the_pause_queues_the_parent_at_once(parent, helper):
    child = _child(parent)
    _answer(child)
    parent.refresh_from_db()
    assert parent.status == AgentRun.Status.RUNNING  # its end found nobody waiting

    assert not _paused(parent, "call-1")

    parent.refresh_from_db()
    assert (parent.status, parent.resumes) == (AgentRun.Status.QUEUED, 1)
    assert not RunEvent.objects.filter(run=parent, type=FrameType.RUN_WAITING).exists()


def test_the_parent_waits_for_its_last_child(parent, helper):
    first, second = _child(parent, "call-1"), _child(parent, "call-2")
    _paused(parent, "call-1", "call-2")

    _answer(first)
    parent.refresh_from_db()
    assert parent.status == AgentRun.Status.AWAITING_SUBAGENT

    _answer(second, "It is 43.")
    parent.refresh_from_db()
    assert (parent.status, parent.resumes) == (AgentRun.Status.QUEUED, 1)


def test_a_waiting_parent_whose_child_ended_unseen_is_woken_by_the_sweeper_once(parent, helper):
    child = _child(parent)
    _paused(parent, "call-1")
    # An end that bypassed the run store (none does): the backstop still wakes the parent.
    AgentRun.objects.filter(pk=child.pk).update(status=AgentRun.Status.FAILED)

    assert subagent_waits_repair() == [parent.pk]
    assert subagent_waits_repair() == []

    parent.refresh_from_db()
    assert (parent.status, parent.resumes) == (AgentRun.Status.QUEUED, 1)


def test_stop_on_the_waiting_parent_ends_both_and_resumes_nothing(parent, helper, user):
    child = _child(parent)
    _paused(parent, "call-1")

    run_cancel(run=parent, user=user)

    parent.refresh_from_db()
    child.refresh_from_db()
    assert parent.status == AgentRun.Status.CANCELLED
    assert child.status == AgentRun.Status.CANCELLED
    assert parent.resumes == 0
    assert [e.type for e in RunEvent.objects.filter(run=parent).order_by("seq")] == [
        FrameType.RUN_WAITING,
        FrameType.RUN_CANCELLED,
    ]


def test_a_waiting_parent_blocks_a_new_question(parent, helper, user):
    from agents.protocol import RequestRefused
    from agents.services.conversations import message_send

    child = _child(parent)
    _paused(parent, "call-1")
    AgentRun.objects.filter(pk=child.pk).update(status=AgentRun.Status.CANCELLED)

    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=parent.conversation, user=user, content="Anything?")
    assert refused.value.code == "run_in_progress"
