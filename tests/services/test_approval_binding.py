"""One approval approves exactly one call: the call it showed, by the engine's id, tool and
arguments. The scripted model is driven to reuse a call id across replies, to give two calls
of one reply the same id, and to reuse an approved id after a run switched to native tool
calling; the owner approves every card they are shown, and only the calls those cards
showed ever run."""

from __future__ import annotations

import uuid

import pytest

from agents.llm.scripted import Reply, ToolCalls
from agents.models import AgentProfile, AgentRun, ModelConfig, ToolApproval, ToolConfig
from agents.services.approvals import approval_decide
from tests.driving import run_execute
from tests.services.test_approvals import _observations, _queued_run

pytestmark = pytest.mark.django_db(transaction=True)

FINAL = "Thought: Done.\nFinal Answer: finished."


@pytest.fixture
def guarded_tools(db) -> list[ToolConfig]:
    """Two calculators that need approval: an observation shows that a call ran."""
    return [
        ToolConfig.objects.create(
            name=name, kind="calculator", description="Adds numbers.", needs_approval=True
        )
        for name in ("danger", "danger2")
    ]


@pytest.fixture
def make_profile(scripted_model, guarded_tools):
    def make(*replies, mode="tools", supports_tool_calling=False) -> tuple[AgentProfile, str]:
        name = f"bind-{uuid.uuid4().hex[:8]}"
        scripted_model.script(name, list(replies))
        config = ModelConfig.objects.create(
            name=name,
            base_url=scripted_model.base_url,
            model=name,
            max_retries=0,
            supports_tool_calling=supports_tool_calling,
        )
        profile = AgentProfile.objects.create(name=name, slug=name, model_config=config, mode=mode)
        profile.tools.set(guarded_tools)
        return profile, name

    return make


def _call(name: str, expression: str, call_id: str = "c1") -> dict[str, object]:
    return {"name": name, "arguments": {"expression": expression}, "id": call_id}


def _approve_everything_shown(user, run: AgentRun) -> list[tuple[str, object]]:
    """Run the worker until the run ends, approving every card the owner is shown; the calls
    the cards showed, in order."""
    shown: list[tuple[str, object]] = []
    for _ in range(10):
        run_execute(run.pk)
        run.refresh_from_db()
        if run.status != AgentRun.Status.AWAITING_APPROVAL:
            return shown
        for approval in ToolApproval.objects.filter(run=run, decision=""):
            shown.append((approval.tool, approval.tool_input))
            approval_decide(approval_id=approval.pk, user=user, approve=True)
    pytest.fail("the run kept pausing")


def _ran(run: AgentRun) -> list[tuple[str, object]]:
    """The calls that ran (the action of every observation that is not an error)."""
    steps = [event.payload for event in run.events.filter(type="step").order_by("seq")]
    actions = {step["call_id"]: step for step in steps if step.get("kind") == "action"}
    return [
        (actions[step["call_id"]]["tool"], actions[step["call_id"]]["tool_input"])
        for step in steps
        if step.get("kind") == "observation" and step["tool"] and not step["is_error"]
    ]


def test_a_reused_call_id_on_later_replies_is_asked_about_again(user, make_profile):
    profile, _ = make_profile(
        ToolCalls([_call("danger", "1+1")]),
        ToolCalls([_call("danger2", "2+2")]),
        ToolCalls([_call("danger", "3+3")]),
        Reply("finished"),
    )
    run = _queued_run(user, profile)

    shown = _approve_everything_shown(user, run)

    first, second, third = (
        ("danger", {"expression": "1+1"}),
        ("danger2", {"expression": "2+2"}),
        ("danger", {"expression": "3+3"}),
    )
    assert shown == [first, second, third]
    assert _ran(run) == [first, second, third]
    assert _observations(run) == ["2", "4", "6"]
    # Each call has its own request, under an id the engine gave it.
    ids = list(ToolApproval.objects.filter(run=run).values_list("call_id", flat=True))
    assert len(set(ids)) == 3
    assert "c1" not in ids


def test_a_reply_whose_calls_share_an_id_is_refused_and_nothing_of_it_runs(
    user, make_profile, scripted_model
):
    profile, model = make_profile(
        ToolCalls([_call("danger", "1+1"), _call("danger2", "40+2")]),
        Reply("finished"),
    )
    run = _queued_run(user, profile)

    shown = _approve_everything_shown(user, run)

    assert shown == []
    assert _ran(run) == []
    assert run.status == AgentRun.Status.SUCCEEDED
    errors = [
        event.payload
        for event in run.events.filter(type="step")
        if event.payload.get("kind") == "error"
    ]
    assert [error["code"] for error in errors] == ["repeated_call_id"]
    # The model was told why, in the next request.
    told = scripted_model.requests(model)[1]["messages"][-1]["content"]
    assert "'c1'" in told
    assert "none of its tool calls ran" in told


def test_an_approved_id_reused_after_the_switch_to_native_mode_is_asked_about_again(
    user, make_profile
):
    approved = "Thought: add.\nAction: danger\nAction Input: 1+1"
    profile, _ = make_profile(
        Reply(approved),
        Reply("no format"),
        Reply("still none"),
        Reply("nothing again"),
        ToolCalls([_call("danger", "6*7", call_id="call-1")]),
        Reply("finished"),
        mode="react",
        supports_tool_calling=True,
    )
    run = _queued_run(user, profile)

    shown = _approve_everything_shown(user, run)

    assert run.events.filter(type="step", payload__kind="mode_switch").exists()
    assert shown == [("danger", "1+1"), ("danger", {"expression": "6*7"})]
    assert _ran(run) == shown
    assert _observations(run)[-1] == "42"
