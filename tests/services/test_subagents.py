"""Starting and stopping sub-agent runs (agents/services/subagents.py), against the database:
one child per call, the limits a child starts with, the refusals the parent's model reads,
and Stop reaching every child. The worker's side is in tests/integration/test_subagents.py."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction

from agents.models import AgentRun, Message, RunEvent
from agents.react.types import ModelCallRecord
from agents.runs.store import run_record_model_call
from agents.services.conversations import run_cancel
from agents.services.subagents import (
    DelegationRefused,
    child_run_start,
    child_runs_stop_after,
)

pytestmark = pytest.mark.django_db


def _model_call(run: AgentRun, index: int) -> None:
    record = ModelCallRecord(
        index=index, messages=[], options={}, response_text="Thought: more", duration_ms=1
    )
    run_record_model_call(run=run, record=record)


def test_one_child_per_call(parent, helper):
    first = child_run_start(
        parent_run_id=parent.pk, call_id="call-1", profile_slug="helper", task="Look it up"
    )
    again = child_run_start(
        parent_run_id=parent.pk, call_id="call-1", profile_slug="helper", task="Look it up"
    )
    other = child_run_start(
        parent_run_id=parent.pk, call_id="call-2", profile_slug="helper", task="Another"
    )

    assert again.pk == first.pk
    assert other.pk != first.pk
    assert AgentRun.objects.filter(parent_run=parent).count() == 2
    assert first.status == AgentRun.Status.QUEUED
    assert (first.task, first.depth, first.parent_call_id) == ("Look it up", 1, "call-1")
    assert first.conversation_id == parent.conversation_id
    assert first.trigger_message_id == parent.trigger_message_id
    assert first.profile_version.profile == helper
    # The database holds the rule too, whoever writes the row.
    with pytest.raises(IntegrityError), transaction.atomic():
        AgentRun.objects.create(
            conversation=parent.conversation,
            trigger_message=parent.trigger_message,
            parent_run=parent,
            parent_call_id="call-1",
        )


def test_a_child_gets_what_is_left_of_the_parents_steps(parent, helper):
    _model_call(parent, 0)
    child = child_run_start(
        parent_run_id=parent.pk, call_id="call-1", profile_slug="helper", task="Look it up"
    )
    # The parent's limit is 4 and it used 1: 3 left, under the helper's own 6.
    assert child.max_steps == 3

    # A grandchild gets what is left of the child's.
    _model_call(child, 0)
    _model_call(child, 1)
    grandchild = child_run_start(
        parent_run_id=child.pk, call_id="call-1", profile_slug="helper", task="Deeper"
    )
    assert (grandchild.max_steps, grandchild.depth) == (1, 2)


def test_no_child_when_no_step_is_left(parent, helper):
    for index in range(4):
        _model_call(parent, index)
    with pytest.raises(DelegationRefused, match="No steps are left"):
        child_run_start(parent_run_id=parent.pk, call_id="call-1", profile_slug="helper", task="x")
    assert not AgentRun.objects.filter(parent_run=parent).exists()


def test_no_child_past_the_depth_limit(parent, helper, settings):
    settings.AGENT_DELEGATION_MAX_DEPTH = 1
    child = child_run_start(
        parent_run_id=parent.pk, call_id="call-1", profile_slug="helper", task="x"
    )
    with pytest.raises(DelegationRefused, match="any deeper"):
        child_run_start(parent_run_id=child.pk, call_id="call-1", profile_slug="helper", task="y")


def test_refusals_the_parents_model_reads(parent, helper):
    with pytest.raises(DelegationRefused, match="empty"):
        child_run_start(parent_run_id=parent.pk, call_id="call-1", profile_slug="helper", task=" ")
    with pytest.raises(DelegationRefused, match="No agent profile nobody"):
        child_run_start(parent_run_id=parent.pk, call_id="call-1", profile_slug="nobody", task="x")
    # A profile the owner may not use is one they cannot delegate to either.
    helper.allowed_groups.add(Group.objects.create(name="staff only"))
    with pytest.raises(DelegationRefused, match="No agent profile helper"):
        child_run_start(parent_run_id=parent.pk, call_id="call-1", profile_slug="helper", task="x")
    assert not AgentRun.objects.filter(parent_run=parent).exists()


def test_stop_on_the_parent_stops_every_child(parent, helper, user):
    child = child_run_start(
        parent_run_id=parent.pk, call_id="call-1", profile_slug="helper", task="x"
    )
    grandchild = child_run_start(
        parent_run_id=child.pk, call_id="call-1", profile_slug="helper", task="y"
    )
    AgentRun.objects.filter(pk=child.pk).update(status=AgentRun.Status.RUNNING, worker_id="w")

    run_cancel(run=parent, user=user)

    parent.refresh_from_db()
    child.refresh_from_db()
    grandchild.refresh_from_db()
    # Running runs are asked to stop (their worker ends them); a queued one ends at once.
    assert parent.cancel_requested_at is not None
    assert child.cancel_requested_at is not None
    assert grandchild.status == AgentRun.Status.CANCELLED
    cancelled = RunEvent.objects.get(run=grandchild, type="run.cancelled")
    assert cancelled.payload["message"] is None
    assert not Message.objects.filter(run=grandchild).exists()


def test_a_parent_that_ended_leaves_no_child_going(parent, helper):
    child = child_run_start(
        parent_run_id=parent.pk, call_id="call-1", profile_slug="helper", task="x"
    )
    assert child_runs_stop_after(parent_run_id=parent.pk) == 0  # the parent still runs

    AgentRun.objects.filter(pk=parent.pk).update(status=AgentRun.Status.FAILED)
    assert child_runs_stop_after(parent_run_id=parent.pk) == 1

    child.refresh_from_db()
    assert child.status == AgentRun.Status.CANCELLED
    assert child_runs_stop_after(parent_run_id=parent.pk) == 0
