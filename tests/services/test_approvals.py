"""Approval before side effects and budgets with Continue, driven in this process against the
scripted model (``run_execute`` is called by the test, as a worker would)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from agents.llm.scripted import Reply
from agents.models import (
    AgentProfile,
    AgentRun,
    Message,
    ModelConfig,
    ToolApproval,
    ToolConfig,
    UsageEntry,
)
from agents.protocol import RefusalCode, RequestRefused
from agents.runs.store import runs_needing_rescue
from agents.services.approvals import (
    approval_decide,
    approvals_expire,
    budget_pauses_expire,
    run_continue,
)
from agents.services.conversations import conversation_create, message_send, run_cancel
from agents.services.execution import runs_rescue
from tests.driving import run_execute

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "Thought: I will add them.\nAction: guarded_calc\nAction Input: 40+2"
FINAL = "Thought: Done.\nFinal Answer: It is 42."


@pytest.fixture
def guarded_tool(db) -> ToolConfig:
    """A calculator that needs approval: its observation shows whether it ran."""
    return ToolConfig.objects.create(
        name="guarded_calc", kind="calculator", description="Adds numbers.", needs_approval=True
    )


@pytest.fixture
def scripted_profile(scripted_model, guarded_tool):
    def make(*replies, **fields) -> tuple[AgentProfile, str]:
        name = f"appr-{uuid.uuid4().hex[:8]}"
        scripted_model.script(name, list(replies))
        config = ModelConfig.objects.create(
            name=name, base_url=scripted_model.base_url, model=name, max_retries=0
        )
        profile = AgentProfile.objects.create(name=name, slug=name, model_config=config, **fields)
        profile.tools.set([guarded_tool])
        return profile, name

    return make


def _queued_run(user, profile) -> AgentRun:
    from agents.services.prompt_versions import prompt_version_ensure

    conversation = conversation_create(owner=user, profile=profile)
    message = Message.objects.create(conversation=conversation, role="user", content="40+2?")
    return AgentRun.objects.create(
        conversation=conversation,
        trigger_message=message,
        profile_version=prompt_version_ensure(profile=profile),
        model_config=profile.model_config,
        model_name=profile.model_config.model,
    )


def _types(run: AgentRun) -> list[str]:
    return list(run.events.order_by("seq").values_list("type", flat=True))


def _observations(run: AgentRun) -> list[str]:
    return [
        event.payload["text"]
        for event in run.events.filter(type="step").order_by("seq")
        if event.payload.get("kind") == "observation"
    ]


def _paused_run(user, scripted_profile, *after) -> tuple[AgentRun, str]:
    profile, model = scripted_profile(Reply(ADD), *after)
    run = _queued_run(user, profile)
    run_execute(run.pk)
    run.refresh_from_db()
    return run, model


def test_a_call_that_needs_approval_pauses_the_run_and_frees_the_worker(
    user, scripted_profile, scripted_model
):
    run, model = _paused_run(user, scripted_profile, Reply(FINAL))

    assert run.status == AgentRun.Status.AWAITING_APPROVAL
    assert (run.worker_id, run.heartbeat_at) == ("", None)
    [approval] = ToolApproval.objects.filter(run=run)
    assert (approval.tool, approval.tool_input, approval.decision) == ("guarded_calc", "40+2", "")
    assert _types(run) == ["run.started", "step", "step", "approval.requested"]
    requested = run.events.get(type="approval.requested").payload
    assert requested["approval_id"] == approval.pk
    assert (requested["tool"], requested["tool_input"]) == ("guarded_calc", "40+2")
    assert _observations(run) == []  # the tool did not run
    assert len(scripted_model.requests(model)) == 1
    # Not stale, however long it waits: the sweeper leaves it to its owner.
    AgentRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert run.pk not in runs_needing_rescue(queued_for_seconds=0)


def test_approve_resumes_the_same_run_and_runs_the_call_once(
    user, scripted_profile, scripted_model
):
    run, model = _paused_run(user, scripted_profile, Reply(FINAL))
    approval = ToolApproval.objects.get(run=run)

    approval_decide(approval_id=approval.pk, user=user, approve=True)
    run.refresh_from_db()
    assert (run.status, run.resumes) == (AgentRun.Status.QUEUED, 1)
    run_execute(run.pk)

    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    assert _observations(run) == ["42"]
    approval.refresh_from_db()
    assert (approval.decision, approval.decided_by) == ("approved", user)
    assert approval.decided_at is not None
    types = _types(run)
    assert types.index("approval.decided") < types.index("run.started", 1)
    decided = run.events.get(type="approval.decided").payload
    assert (decided["decision"], decided["decided_by"]) == ("approved", user.username)
    # The model saw the tool's result on the second call; the first was not repeated.
    requests = scripted_model.requests(model)
    assert len(requests) == 2
    assert "Observation: 42" in requests[1]["messages"][-1]["content"]


def test_deny_becomes_an_observation_with_the_reason_and_the_model_goes_on(
    user, scripted_profile, scripted_model
):
    run, model = _paused_run(user, scripted_profile, Reply(FINAL))
    approval = ToolApproval.objects.get(run=run)

    approval_decide(approval_id=approval.pk, user=user, approve=False, reason="  not today ")
    run_execute(run.pk)

    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    [observation] = _observations(run)
    assert "declined" in observation
    assert "not today" in observation
    assert "42" not in observation
    approval.refresh_from_db()
    assert (approval.decision, approval.reason) == ("declined", "not today")
    assert "not today" in scripted_model.requests(model)[1]["messages"][-1]["content"]


def test_only_one_decision_wins(user, scripted_profile):
    run, _ = _paused_run(user, scripted_profile, Reply(FINAL))
    approval = ToolApproval.objects.get(run=run)
    approval_decide(approval_id=approval.pk, user=user, approve=True)

    with pytest.raises(RequestRefused) as refused:
        approval_decide(approval_id=approval.pk, user=user, approve=False)

    assert refused.value.code == RefusalCode.ALREADY_DECIDED
    assert "already approved" in refused.value.message
    approval.refresh_from_db()
    assert approval.decision == "approved"
    assert run.events.filter(type="approval.decided").count() == 1
    run_execute(run.pk)


def test_someone_else_cannot_decide(user, other_user, scripted_profile):
    run, _ = _paused_run(user, scripted_profile)
    approval = ToolApproval.objects.get(run=run)

    with pytest.raises(RequestRefused) as refused:
        approval_decide(approval_id=approval.pk, user=other_user, approve=True)

    assert refused.value.code == RefusalCode.NOT_FOUND
    approval.refresh_from_db()
    assert approval.decision == ""
    run.refresh_from_db()
    assert run.status == AgentRun.Status.AWAITING_APPROVAL
    run_cancel(run=run, user=user)


def test_bad_input_is_refused_and_loses_nothing(user, scripted_profile):
    run, _ = _paused_run(user, scripted_profile)
    approval = ToolApproval.objects.get(run=run)

    with pytest.raises(RequestRefused) as too_long:
        approval_decide(approval_id=approval.pk, user=user, approve=False, reason="x" * 2001)
    with pytest.raises(RequestRefused) as missing:
        approval_decide(approval_id=approval.pk + 1000, user=user, approve=True)

    assert too_long.value.code == RefusalCode.TOO_LONG
    assert missing.value.code == RefusalCode.NOT_FOUND
    approval.refresh_from_db()
    assert approval.decision == ""
    # The pause still waits, and a proper decision still works.
    approval_decide(approval_id=approval.pk, user=user, approve=False)
    run.refresh_from_db()
    assert run.status == AgentRun.Status.QUEUED
    run_cancel(run=run, user=user)


def test_a_paused_run_blocks_a_new_send_and_can_be_stopped(user, scripted_profile):
    run, _ = _paused_run(user, scripted_profile)

    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=run.conversation, user=user, content="hello?", client_id="c-1")
    assert refused.value.code == RefusalCode.RUN_IN_PROGRESS

    run_cancel(run=run, user=user)
    run.refresh_from_db()
    assert run.status == AgentRun.Status.CANCELLED
    approval = ToolApproval.objects.get(run=run)
    # Closed with its own outcome, not left pending: nobody decided and the call never ran.
    assert (approval.decision, approval.decided_by) == ("cancelled", user)
    assert approval.decided_at is not None
    assert approval.get_decision_display() == "Run stopped before a decision"
    with pytest.raises(RequestRefused) as late:
        approval_decide(approval_id=approval.pk, user=user, approve=True)
    assert late.value.code == RefusalCode.NOT_PAUSED
    approval.refresh_from_db()
    assert approval.decision == "cancelled"
    assert run.events.filter(type="approval.decided").count() == 0
    assert _observations(run) == []


def test_stopping_a_run_after_its_decision_leaves_the_decision_as_it_was(user, scripted_profile):
    run, _ = _paused_run(user, scripted_profile)
    approval = ToolApproval.objects.get(run=run)
    approval_decide(approval_id=approval.pk, user=user, approve=False, reason="no")

    run_cancel(run=run, user=user)  # queued again by the decision: stopped before it resumes

    approval.refresh_from_db()
    assert (approval.decision, approval.reason) == ("declined", "no")


def test_the_sweep_declines_pauses_older_than_the_setting(
    user, scripted_profile, scripted_model, settings
):
    settings.CHAT_APPROVAL_EXPIRES_AFTER = 3600
    run, _ = _paused_run(user, scripted_profile, Reply(FINAL))
    approval = ToolApproval.objects.get(run=run)

    assert approvals_expire() == []  # a fresh pause is left alone
    ToolApproval.objects.filter(pk=approval.pk).update(
        requested_at=timezone.now() - timedelta(seconds=3601)
    )
    assert approvals_expire() == [approval.pk]
    run_execute(run.pk)

    approval.refresh_from_db()
    assert (approval.decision, approval.decided_by) == ("expired", None)
    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    [observation] = _observations(run)
    assert "declined" in observation
    assert "42" not in observation


def test_the_sweep_skips_the_expiries_while_nothing_is_paused_and_expires_a_stale_pause(
    user, scripted_profile, scripted_model, settings, django_assert_num_queries
):
    settings.CHAT_APPROVAL_EXPIRES_AFTER = 3600
    enqueued: list[int] = []
    # Whether any run is paused, then the runs to rescue: the expiries' queries are skipped.
    with django_assert_num_queries(2):
        assert runs_rescue(enqueue=enqueued.append) == []

    run, _ = _paused_run(user, scripted_profile, Reply(FINAL))
    approval = ToolApproval.objects.get(run=run)
    ToolApproval.objects.filter(pk=approval.pk).update(
        requested_at=timezone.now() - timedelta(seconds=3601)
    )
    cache.delete("chat:sweep-lock")  # the last sweep's, which would keep this one out
    runs_rescue(enqueue=enqueued.append)

    approval.refresh_from_db()
    assert approval.decision == "expired"


def test_a_run_stopped_at_its_step_budget_continues_where_it_stopped(
    user, scripted_profile, scripted_model, guarded_tool
):
    ToolConfig.objects.filter(pk=guarded_tool.pk).update(needs_approval=False)
    profile, model = scripted_profile(Reply(ADD), Reply(FINAL), budget_steps=1)
    run = _queued_run(user, profile)

    run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == AgentRun.Status.OUT_OF_BUDGET
    reached = run.events.get(type="run.budget_reached").payload
    assert (reached["limit"], reached["continue_steps"]) == ("steps", 1)
    assert _observations(run) == ["42"]

    run_continue(run=run, user=user)
    assert (run.status, run.budget_grants) == (AgentRun.Status.QUEUED, 1)
    run_execute(run.pk)

    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    assert _observations(run) == ["42"]  # the tool ran once
    assert run.answer.content == "It is 42."
    assert len(scripted_model.requests(model)) == 2
    assert run.events.filter(type="run.continued").count() == 1


def test_a_tool_call_budget_stops_before_the_call_and_continue_runs_it_once(
    user, scripted_profile, scripted_model, guarded_tool
):
    ToolConfig.objects.filter(pk=guarded_tool.pk).update(needs_approval=False)
    again = "Thought: Once more.\nAction: guarded_calc\nAction Input: 1+1"
    profile, model = scripted_profile(
        Reply(ADD), Reply(again), Reply(FINAL), budget_tool_calls={"guarded_calc": 1}
    )
    run = _queued_run(user, profile)

    run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == AgentRun.Status.OUT_OF_BUDGET
    reached = run.events.get(type="run.budget_reached").payload
    assert (reached["limit"], reached["tool"]) == ("tool_calls", "guarded_calc")
    assert _observations(run) == ["42"]

    run_continue(run=run, user=user)
    run_execute(run.pk)

    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    assert _observations(run) == ["42", "2"]
    assert len(scripted_model.requests(model)) == 3


def _stopped_at_budget(user, scripted_profile, guarded_tool) -> AgentRun:
    ToolConfig.objects.filter(pk=guarded_tool.pk).update(needs_approval=False)
    profile, _ = scripted_profile(Reply(ADD), Reply(FINAL), budget_steps=1)
    run = _queued_run(user, profile)
    run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == AgentRun.Status.OUT_OF_BUDGET
    return run


def test_the_sweep_stops_a_run_left_at_its_budget_longer_than_the_setting(
    user, scripted_profile, guarded_tool, settings
):
    settings.CHAT_APPROVAL_EXPIRES_AFTER = 3600
    run = _stopped_at_budget(user, scripted_profile, guarded_tool)
    reached = run.events.get(type="run.budget_reached")

    assert budget_pauses_expire() == []  # a fresh stop waits for Continue
    later = reached.created_at + timedelta(seconds=3601)
    assert budget_pauses_expire(now=later) == [run.pk]
    assert budget_pauses_expire(now=later) == []  # once

    run.refresh_from_db()
    assert run.status == AgentRun.Status.CANCELLED
    assert run.finished_at is not None
    assert _types(run)[-1] == "run.cancelled"
    assert _observations(run) == ["42"]  # what it did stays
    with pytest.raises(RequestRefused) as late:
        run_continue(run=run, user=user)
    assert late.value.code == RefusalCode.NOT_PAUSED
    # The conversation is free again: the next message starts a run.
    message_send(conversation=run.conversation, user=user, content="next", client_id="c-2")


def test_the_sweep_leaves_a_run_that_was_continued(user, scripted_profile, guarded_tool, settings):
    settings.CHAT_APPROVAL_EXPIRES_AFTER = 3600
    run = _stopped_at_budget(user, scripted_profile, guarded_tool)
    reached = run.events.get(type="run.budget_reached")
    run_continue(run=run, user=user)

    assert budget_pauses_expire(now=reached.created_at + timedelta(seconds=3601)) == []
    run.refresh_from_db()
    assert run.status == AgentRun.Status.QUEUED
    run_cancel(run=run, user=user)


def test_continue_is_refused_for_a_run_not_stopped_at_a_budget(user, other_user, scripted_profile):
    run, _ = _paused_run(user, scripted_profile)

    with pytest.raises(RequestRefused) as not_stopped:
        run_continue(run=run, user=user)
    with pytest.raises(RequestRefused) as stranger:
        run_continue(run=run, user=other_user)

    assert not_stopped.value.code == RefusalCode.NOT_PAUSED
    assert stranger.value.code == RefusalCode.NOT_FOUND
    run.refresh_from_db()
    assert (run.status, run.budget_grants) == (AgentRun.Status.AWAITING_APPROVAL, 0)
    run_cancel(run=run, user=user)


def test_a_run_resumed_while_its_pausing_thread_is_still_leaving_is_not_dropped(
    user, scripted_profile, scripted_model, monkeypatch
):
    import threading

    from agents.services.execution import _monitor

    run, _ = _paused_run(user, scripted_profile, Reply(FINAL))
    approval = ToolApproval.objects.get(run=run)
    approval_decide(approval_id=approval.pk, user=user, approve=True)
    # The thread that paused the run has not left its watch yet when the resumed task comes.
    entered, waiting = threading.Event(), threading.Event()
    wait_until_free = _monitor.wait_until_free

    def resumed_task_waits(run_id: int, *, timeout: float) -> bool:
        waiting.set()
        return wait_until_free(run_id, timeout=30)

    monkeypatch.setattr(_monitor, "wait_until_free", resumed_task_waits)

    def pausing_thread() -> None:
        with _monitor.watch(run.pk):
            entered.set()
            assert waiting.wait(30)

    holder = threading.Thread(target=pausing_thread)
    holder.start()
    assert entered.wait(30)
    run_execute(run.pk)  # waits for the pausing thread to leave, then runs
    holder.join(30)

    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    assert _observations(run) == ["42"]


def test_two_tabs_deciding_at_once_get_one_decision(user, scripted_profile):
    import threading

    from django.db import connection

    run, _ = _paused_run(user, scripted_profile)
    approval = ToolApproval.objects.get(run=run)
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def tab(approve: bool) -> None:
        start.wait(30)
        try:
            approval_decide(approval_id=approval.pk, user=user, approve=approve)
            outcomes.append("approved" if approve else "declined")
        except RequestRefused as refused:
            outcomes.append(refused.code)
        finally:
            connection.close()

    tabs = [threading.Thread(target=tab, args=(approve,)) for approve in (True, False)]
    for thread in tabs:
        thread.start()
    for thread in tabs:
        thread.join(30)

    approval.refresh_from_db()
    assert sorted(outcomes) == sorted([approval.decision, "already_decided"])
    assert run.events.filter(type="approval.decided").count() == 1
    run.refresh_from_db()
    assert (run.status, run.resumes) == (AgentRun.Status.QUEUED, 1)
    run_cancel(run=run, user=user)


@pytest.mark.parametrize(
    ("approve", "reason"), [("yes", ""), (1, ""), (None, ""), (True, 5), (False, ["no"])]
)
def test_a_decision_of_the_wrong_shape_is_refused_and_decides_nothing(
    user, scripted_profile, approve, reason
):
    run, _ = _paused_run(user, scripted_profile)
    approval = ToolApproval.objects.get(run=run)

    with pytest.raises(RequestRefused) as refused:
        approval_decide(approval_id=approval.pk, user=user, approve=approve, reason=reason)

    assert refused.value.code == RefusalCode.INVALID_FIELD
    approval.refresh_from_db()
    assert approval.decision == ""
    run.refresh_from_db()
    assert run.status == AgentRun.Status.AWAITING_APPROVAL
    run_cancel(run=run, user=user)


def _run_with_ledger_entry(user, profile) -> AgentRun:
    """A queued run with the usage entry a send opens with it."""
    run = _queued_run(user, profile)
    UsageEntry.objects.create(
        user_id=user.pk,
        kind=UsageEntry.Kind.RUN,
        run_id=run.pk,
        conversation_id=run.conversation_id,
    )
    return run


def test_continue_counts_against_the_daily_quota_like_a_send(
    user, scripted_profile, scripted_model, guarded_tool, settings
):
    ToolConfig.objects.filter(pk=guarded_tool.pk).update(needs_approval=False)
    profile, model = scripted_profile(Reply(ADD), Reply(FINAL), budget_steps=1)
    run = _run_with_ledger_entry(user, profile)
    run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == AgentRun.Status.OUT_OF_BUDGET
    # The first step used more than the whole day's allowance.
    settings.CHAT_DAILY_TOKEN_QUOTA = 1

    with pytest.raises(RequestRefused) as refused:
        run_continue(run=run, user=user)

    # Told what to do about the paused run, in the words the page shows.
    assert (refused.value.code, refused.value.message) == (
        RefusalCode.QUOTA_EXCEEDED,
        "You have used today's token allowance: stop the run, or go on tomorrow.",
    )
    run.refresh_from_db()
    assert (run.status, run.budget_grants) == (AgentRun.Status.OUT_OF_BUDGET, 0)
    assert not run.events.filter(type="run.continued").exists()
    assert len(scripted_model.requests(model)) == 1


def test_a_decision_counts_against_the_daily_quota_like_a_send(
    user, scripted_profile, scripted_model, settings
):
    profile, _ = scripted_profile(Reply(ADD), Reply(FINAL))
    run = _run_with_ledger_entry(user, profile)
    run_execute(run.pk)
    approval = ToolApproval.objects.get(run=run)
    settings.CHAT_DAILY_TOKEN_QUOTA = 1

    with pytest.raises(RequestRefused) as refused:
        approval_decide(approval_id=approval.pk, user=user, approve=True)

    assert refused.value.code == RefusalCode.QUOTA_EXCEEDED
    approval.refresh_from_db()
    assert approval.decision == ""
    run.refresh_from_db()
    assert run.status == AgentRun.Status.AWAITING_APPROVAL

    # With the allowance back, the same decision goes through and holds a share of it.
    settings.CHAT_DAILY_TOKEN_QUOTA = 100_000
    approval_decide(approval_id=approval.pk, user=user, approve=True)
    run.refresh_from_db()
    assert run.status == AgentRun.Status.QUEUED
    entry = UsageEntry.objects.get(run_id=run.pk)
    used = entry.prompt_tokens + entry.completion_tokens
    assert entry.reserved_tokens == used + settings.CHAT_QUOTA_RESERVATION_TOKENS
