"""Approval and per-tool budgets over a batch of native calls: whatever else the batch holds
(a call to a tool that does not exist, a call with bad arguments, a call already declined),
a call that needs approval never runs without it, and a budget counts exactly the calls that
will run."""

from __future__ import annotations

from agents.react.errors import AwaitingApproval, BudgetExhausted
from agents.react.executor import AgentConfig, AgentExecutor, RunBudget
from agents.react.prompt import PromptConfig
from agents.react.testing import ScriptedChatModel, tool_calls
from agents.react.types import (
    ApprovalDecisionStep,
    ApprovalRequestStep,
    ErrorStep,
    ObservationStep,
)
from tests.react.conftest import final
from tests.react.test_pauses import run_until_paused, stored
from tests.react.tools import Adder


class GuardedAdder(Adder):
    needs_approval = True


def engine(replies, tools, *, budget=None):
    return AgentExecutor(
        model=ScriptedChatModel(replies),
        tools=tools,
        prompt=PromptConfig(mode="tools"),
        config=AgentConfig(budget=budget),
    )


def requests(steps):
    return [step for step in steps if isinstance(step, ApprovalRequestStep)]


def decide(request, *, approved, reason=""):
    """A person's decision on the call ``request`` asked about."""
    return ApprovalDecisionStep(call_id=request.call_id, approved=approved, reason=reason)


def test_an_unknown_tool_earlier_in_the_batch_does_not_let_a_guarded_call_through():
    guarded = GuardedAdder()
    batch = tool_calls(("no_such_tool", "{}"), ("adder", '{"a": 2, "b": 3}'))

    steps, paused = run_until_paused(engine([batch, "done"], [guarded]))

    assert isinstance(paused, AwaitingApproval)
    assert [(r.tool, r.tool_input) for r in requests(steps)] == [("adder", {"a": 2, "b": 3})]
    assert guarded.calls == []


def test_a_call_with_bad_arguments_earlier_in_the_batch_does_not_let_a_guarded_call_through():
    guarded = GuardedAdder()
    batch = tool_calls(("adder", '{"a": "two"}'), ("adder", '{"a": 2, "b": 3}'))

    steps, paused = run_until_paused(engine([batch, "done"], [guarded]))

    assert isinstance(paused, AwaitingApproval)
    # Nobody is asked about the call that cannot run; the valid one waits for its answer.
    assert [(r.tool, r.tool_input) for r in requests(steps)] == [("adder", {"a": 2, "b": 3})]
    assert guarded.calls == []


def test_declining_one_call_of_a_batch_does_not_approve_the_next():
    batch = tool_calls(("adder", '{"a": 1, "b": 1}'), ("adder", '{"a": 2, "b": 3}'))
    first, _ = run_until_paused(engine([batch], [GuardedAdder()]))
    asked_first, asked_second = requests(first)

    # Only the first call is decided (declined): the second still waits for its answer.
    guarded = GuardedAdder()
    prior = [*stored(first), decide(asked_first, approved=False, reason="not that one")]
    again, paused = run_until_paused(engine(["done"], [guarded]), prior=prior)

    assert isinstance(paused, AwaitingApproval)
    assert guarded.calls == []
    assert requests(again) == []  # asked once already

    # Once the second is approved, it alone runs; the first is reported as declined.
    model = ScriptedChatModel(["done"])
    resumed = list(
        AgentExecutor(
            model=model, tools=[guarded], prompt=PromptConfig(mode="tools"), config=AgentConfig()
        ).run("q", prior_steps=[*prior, decide(asked_second, approved=True)])
    )

    assert guarded.calls == [(2, 3)]
    [declined] = [step for step in resumed if isinstance(step, ErrorStep)]
    assert declined.code == "declined"
    assert "not that one" in declined.message
    told = {step.call_id: step for step in resumed if isinstance(step, ObservationStep)}
    assert told[asked_first.call_id].is_error
    assert "not that one" in told[asked_first.call_id].text
    assert (told[asked_second.call_id].text, told[asked_second.call_id].is_error) == ("5", False)
    assert final(resumed).text == "done"


def test_two_calls_of_a_budgeted_tool_in_one_batch_both_count():
    adder = Adder()
    batch = tool_calls(("adder", '{"a": 1, "b": 1}'), ("adder", '{"a": 2, "b": 3}'))

    _, paused = run_until_paused(
        engine([batch, "done"], [adder], budget=RunBudget(tool_calls={"adder": 1}))
    )

    assert isinstance(paused, BudgetExhausted)
    assert (paused.limit, paused.tool) == ("tool_calls", "adder")
    assert adder.calls == []  # none of the batch ran


def test_a_budget_is_checked_before_anyone_is_asked():
    batch = tool_calls(("adder", '{"a": 1, "b": 1}'), ("adder", '{"a": 2, "b": 3}'))

    steps, paused = run_until_paused(
        engine([batch], [GuardedAdder()], budget=RunBudget(tool_calls={"adder": 1}))
    )

    assert isinstance(paused, BudgetExhausted)
    assert requests(steps) == []


def _three_guarded_calls_asked():
    batch = tool_calls(
        ("adder", '{"a": 1, "b": 1}'), ("adder", '{"a": 2, "b": 2}'), ("adder", '{"a": 3, "b": 3}')
    )
    first, paused = run_until_paused(
        engine([batch], [GuardedAdder()], budget=RunBudget(tool_calls={"adder": 3}))
    )
    assert isinstance(paused, AwaitingApproval)
    return first, requests(first)


def test_declined_calls_cost_nothing_against_a_tool_budget():
    # The caller resumes with a tighter budget than the one the calls were asked under: only
    # the approved call will run, so one call of the budget is enough.
    first, (one, two, three) = _three_guarded_calls_asked()
    decisions = [
        decide(one, approved=False),
        decide(two, approved=False),
        decide(three, approved=True),
    ]
    guarded = GuardedAdder()

    resumed = list(
        engine(["done"], [guarded], budget=RunBudget(tool_calls={"adder": 1})).run(
            "q", prior_steps=[*stored(first), *decisions]
        )
    )

    assert guarded.calls == [(3, 3)]
    assert [step.code for step in resumed if isinstance(step, ErrorStep)] == ["declined"] * 2
    assert final(resumed).text == "done"


def test_approved_calls_count_against_a_tool_budget():
    first, (one, two, three) = _three_guarded_calls_asked()
    decisions = [
        decide(one, approved=True),
        decide(two, approved=True),
        decide(three, approved=False),
    ]
    guarded = GuardedAdder()

    _, paused = run_until_paused(
        engine(["done"], [guarded], budget=RunBudget(tool_calls={"adder": 1})),
        prior=[*stored(first), *decisions],
    )

    assert isinstance(paused, BudgetExhausted)
    assert (paused.limit, paused.tool) == ("tool_calls", "adder")
    assert guarded.calls == []
