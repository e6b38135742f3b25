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
    ActionStep,
    ApprovalDecisionStep,
    ApprovalRequestStep,
    ErrorStep,
    ObservationStep,
)
from tests.react.conftest import final
from tests.react.test_pauses import run_until_paused, stored
from tests.react.tools import Adder, Echo


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
    assert str(paused) == "The run used its budget of 1 calls of adder."
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


def told_to_the_model(steps):
    """What the model is told about each call of the run: its observation, by call id."""
    return {step.call_id: step.text for step in steps if isinstance(step, ObservationStep)}


def test_the_model_is_told_which_of_its_calls_had_bad_arguments():
    batch = tool_calls(("adder", '{"a": "two"}'), ("adder", '{"a": 2, "b": 3}'))

    steps = list(engine([batch, "done"], [Adder()]).run("q"))

    bad, good = told_to_the_model(steps).values()
    assert bad.startswith("The input for adder is not valid: ")
    assert good == "5"


def test_a_call_declined_without_a_reason_is_reported_without_one():
    """The model is told the call to this tool was declined, and no empty "reason" follows."""
    one_call = tool_calls(("adder", '{"a": 1, "b": 1}'))
    first, _ = run_until_paused(engine([one_call], [GuardedAdder()]))
    [asked] = requests(first)
    guarded = GuardedAdder()

    resumed = list(
        engine(["done"], [guarded]).run(
            "q", prior_steps=[*stored(first), decide(asked, approved=False)]
        )
    )

    assert guarded.calls == []
    assert told_to_the_model(resumed)[asked.call_id] == (
        "The user declined this call to adder; it was not run."
    )


def test_a_call_run_on_a_decision_taken_for_another_call_names_the_refused_tool():
    """A run stored before the engine named its calls may hold two calls under one id: the
    model is told which call was not run, and why."""
    shown = ActionStep(tool="adder", tool_input={"a": 2, "b": 3}, call_id="c1")
    other = ActionStep(tool="adder", tool_input={"a": 5, "b": 1}, call_id="c1")
    prior = [
        shown,
        ApprovalRequestStep(tool="adder", call_id="c1", tool_input={"a": 2, "b": 3}),
        ApprovalDecisionStep(call_id="c1", approved=True),
        ObservationStep(tool="adder", call_id="c1", text="5"),
        other,
    ]
    guarded = GuardedAdder()

    steps = list(engine(["done"], [guarded]).run("q", prior_steps=stored(prior)))

    assert guarded.calls == []
    assert told_to_the_model(steps)["c1"] == (
        "The call to adder was not run: the decision under its id was taken on another call."
    )


class RunsEverything:
    """A tool policy that would let every call run (``None`` for each)."""

    def answer(self, tool, arguments):
        return None


def test_under_a_tool_policy_that_runs_every_call_a_guarded_tool_still_never_runs():
    """Nobody is asked under a policy, so a call that needs a person's yes is not run, and
    the model is told so; the other calls of the batch run."""
    guarded = GuardedAdder()
    batch = tool_calls(("adder", '{"a": 2, "b": 3}'))
    policy_run = AgentExecutor(
        model=ScriptedChatModel([batch, "done"]),
        tools=[guarded],
        prompt=PromptConfig(mode="tools"),
        tool_policy=RunsEverything(),
    )

    steps = list(policy_run.run("q"))

    assert guarded.calls == []
    assert [step.code for step in steps if isinstance(step, ErrorStep)] == ["not_recorded"]
    [told] = told_to_the_model(steps).values()
    assert told.startswith("The call to adder was not run: it is not recorded")
    assert final(steps).text == "done"


class GuardedEcho(Echo):
    needs_approval = True


def test_a_react_call_with_plain_text_input_waits_for_approval():
    """A ReAct Action Input may be plain text rather than JSON: it is still a valid call, so
    it is asked about, and it does not run before the answer."""
    guarded = GuardedEcho()
    reply = "Thought: say it\nAction: echo\nAction Input: hello there"
    react_run = AgentExecutor(
        model=ScriptedChatModel([reply, "Final Answer: done"]),
        tools=[guarded],
        prompt=PromptConfig(mode="react"),
    )

    steps, paused = run_until_paused(react_run)

    assert isinstance(paused, AwaitingApproval)
    assert [(r.tool, r.tool_input) for r in requests(steps)] == [("echo", "hello there")]
    assert guarded.inputs == []


def test_a_decision_applies_to_its_call_whatever_order_the_stored_arguments_keys_are_in():
    """The database may give back a call's arguments with their keys in another order than
    the request that was shown (PostgreSQL's jsonb keeps its own order): it is the same
    call, and the person's yes runs it."""
    prior = [
        ActionStep(tool="adder", tool_input={"b": 3, "a": 2}, call_id="c1"),
        ApprovalRequestStep(tool="adder", call_id="c1", tool_input={"a": 2, "b": 3}),
        ApprovalDecisionStep(call_id="c1", approved=True),
    ]
    guarded = GuardedAdder()

    steps = list(engine(["done"], [guarded]).run("q", prior_steps=stored(prior)))

    assert guarded.calls == [(2, 3)]
    assert told_to_the_model(steps)["c1"] == "5"
