"""The engine's two pause points: a call that needs approval, and a budget. Each stops the
run before anything of the step starts, and a run resumed from the stored steps plus the
decision (or a larger budget) goes on without repeating a tool."""

from __future__ import annotations

import json

import pytest

from agents.react.errors import AwaitingApproval, BudgetExhausted
from agents.react.executor import AgentConfig, AgentExecutor, RunBudget
from agents.react.prompt import PromptConfig
from agents.react.testing import ScriptedChatModel, tool_calls
from agents.react.types import (
    ActionStep,
    ApprovalDecisionStep,
    ApprovalRequestStep,
    Completion,
    ErrorStep,
    FinalAnswerStep,
    ModelCallRecord,
    ObservationStep,
    step_from_event,
    step_to_event,
)
from tests.react.conftest import final
from tests.react.tools import Adder

ADD = 'Thought: add\nAction: adder\nAction Input: {"a": 2, "b": 3}'
ADD_MORE = 'Thought: once more\nAction: adder\nAction Input: {"a": 5, "b": 1}'


class GuardedAdder(Adder):
    needs_approval = True


def executor(model, tools, *, mode="react", config=None):
    return AgentExecutor(
        model=model, tools=tools, prompt=PromptConfig(mode=mode), config=config or AgentConfig()
    )


def run_until_paused(engine, *, prior=()):
    """The steps up to the pause, stored as the pipeline stores them, and the pause."""
    steps = []
    generator = engine.run("q", prior_steps=prior)
    while True:
        try:
            steps.append(next(generator))
        except (AwaitingApproval, BudgetExhausted) as paused:
            return steps, paused
        except StopIteration:
            pytest.fail(f"the run ended without pausing: {steps[-1]}")


def stored(steps):
    return [
        step_from_event(json.loads(json.dumps(step_to_event(step))))
        for step in steps
        if not isinstance(step, ModelCallRecord | FinalAnswerStep)
    ]


def observations(steps):
    return [step.text for step in steps if isinstance(step, ObservationStep)]


def test_a_call_that_needs_approval_is_asked_about_and_not_run():
    adder = GuardedAdder()
    steps, paused = run_until_paused(executor(ScriptedChatModel([ADD]), [adder]))

    assert isinstance(paused, AwaitingApproval)
    assert paused.call_ids == ["call-1"]
    assert isinstance(steps[-1], ApprovalRequestStep)
    # The exact call, as the model wrote it.
    assert (steps[-1].tool, steps[-1].tool_input) == ("adder", '{"a": 2, "b": 3}')
    assert adder.calls == []


@pytest.mark.parametrize("approved", [True, False])
def test_a_decision_resumes_the_run_once(approved):
    first, _ = run_until_paused(executor(ScriptedChatModel([ADD]), [GuardedAdder()]))
    decision = ApprovalDecisionStep(call_id="call-1", approved=approved, reason="not now")
    prior = [*stored(first), *stored([decision])]
    adder = GuardedAdder()
    model = ScriptedChatModel(["Final Answer: done"])

    resumed = list(executor(model, [adder]).run("q", prior_steps=prior))

    assert final(resumed).text == "done"
    assert not any(isinstance(step, ApprovalRequestStep) for step in resumed)
    if approved:
        assert adder.calls == [(2, 3)]
        assert observations(resumed) == ["5"]
    else:
        assert adder.calls == []
        [told] = observations(resumed)
        assert "declined" in told
        assert "not now" in told
        assert told in model.calls[0].last_content


def test_a_resumed_run_without_the_decision_asks_nothing_new():
    first, _ = run_until_paused(executor(ScriptedChatModel([ADD]), [GuardedAdder()]))

    again, paused = run_until_paused(
        executor(ScriptedChatModel([]), [GuardedAdder()]), prior=stored(first)
    )

    assert again == []
    assert isinstance(paused, AwaitingApproval)


def test_invalid_arguments_are_told_to_the_model_without_asking_anyone():
    bad = 'Thought: add\nAction: adder\nAction Input: {"a": "two"}'
    model = ScriptedChatModel([bad, "Final Answer: sorry"])

    steps = list(executor(model, [GuardedAdder()]).run("q"))

    assert not any(isinstance(step, ApprovalRequestStep) for step in steps)
    assert final(steps).text == "sorry"


def test_native_batch_pauses_before_any_of_its_calls():
    plain, guarded = Adder(), GuardedAdder()
    plain.name = "plain"
    batch = tool_calls(("plain", '{"a": 1, "b": 1}'), ("adder", '{"a": 2, "b": 3}'))
    steps, paused = run_until_paused(
        executor(ScriptedChatModel([batch]), [plain, guarded], mode="tools")
    )

    assert isinstance(paused, AwaitingApproval)
    assert plain.calls == []
    assert guarded.calls == []
    assert [step.tool for step in steps if isinstance(step, ApprovalRequestStep)] == ["adder"]


def test_the_step_budget_stops_the_run_and_a_larger_one_goes_on():
    config = AgentConfig(budget=RunBudget(steps=1))
    adder = Adder()
    first, paused = run_until_paused(executor(ScriptedChatModel([ADD]), [adder], config=config))

    assert isinstance(paused, BudgetExhausted)
    assert paused.limit == "steps"
    assert str(paused) == "The run used its budget of 1 steps."
    assert observations(first) == ["5"]

    more = AgentConfig(budget=RunBudget(steps=2))
    model = ScriptedChatModel(["Final Answer: 5"])
    resumed = list(executor(model, [adder], config=more).run("q", prior_steps=stored(first)))
    assert final(resumed).text == "5"
    assert adder.calls == [(2, 3)]


def test_the_token_budget_stops_before_the_next_model_call():
    config = AgentConfig(budget=RunBudget(tokens=1))
    model = ScriptedChatModel([ADD, "Final Answer: 5"])

    _, paused = run_until_paused(executor(model, [Adder()], config=config))

    assert isinstance(paused, BudgetExhausted)
    assert paused.limit == "tokens"
    assert model.remaining == 1


@pytest.mark.parametrize(
    ("budget", "stops"),
    [(35, True), (42, True), (43, False)],
    ids=["more-than-the-prompt", "exactly-used", "one-to-spare"],
)
def test_the_token_budget_counts_the_prompt_and_the_reply(budget, stops):
    """The first call used 30 tokens of prompt and 12 of reply: a budget of 42 or less is
    used up before the second call; 43 leaves room for it."""
    config = AgentConfig(budget=RunBudget(tokens=budget))
    first_reply = Completion(text=ADD, prompt_tokens=30, completion_tokens=12)
    model = ScriptedChatModel([first_reply, "Final Answer: 5"])
    engine = executor(model, [Adder()], config=config)

    if stops:
        _, paused = run_until_paused(engine)
        assert isinstance(paused, BudgetExhausted)
        assert str(paused) == f"The run used 42 tokens of its budget of {budget}."
        assert model.remaining == 1
    else:
        assert final(list(engine.run("q"))).text == "5"


def test_a_resumed_run_counts_the_tokens_used_before_it_against_its_budget():
    """Two calls of 30 prompt and 12 reply tokens each were stored: 84 tokens of a budget
    of 80 are used, so the resumed run stops before calling the model again."""
    replies = [
        Completion(text=ADD, prompt_tokens=30, completion_tokens=12),
        Completion(text=ADD_MORE, prompt_tokens=30, completion_tokens=12),
    ]
    two_steps = AgentConfig(budget=RunBudget(steps=2))
    first, _ = run_until_paused(executor(ScriptedChatModel(replies), [Adder()], config=two_steps))
    records = [
        ModelCallRecord(index=index, messages=[], options={}, response_text=reply.text,
                        prompt_tokens=30, completion_tokens=12)
        for index, reply in enumerate(replies)
    ]  # fmt: skip
    model = ScriptedChatModel(["Final Answer: 6"])
    tight = AgentConfig(budget=RunBudget(tokens=80))

    _, paused = run_until_paused(
        executor(model, [Adder()], config=tight), prior=[*records, *stored(first)]
    )

    assert isinstance(paused, BudgetExhausted)
    assert str(paused) == "The run used 84 tokens of its budget of 80."
    assert model.remaining == 1


def test_a_tool_call_budget_stops_before_the_call_over_it():
    config = AgentConfig(budget=RunBudget(tool_calls={"adder": 1}))
    adder = Adder()
    first, paused = run_until_paused(
        executor(ScriptedChatModel([ADD, ADD_MORE]), [adder], config=config)
    )

    assert isinstance(paused, BudgetExhausted)
    assert (paused.limit, paused.tool) == ("tool_calls", "adder")
    assert adder.calls == [(2, 3)]

    more = AgentConfig(budget=RunBudget(tool_calls={"adder": 2}))
    model = ScriptedChatModel(["Final Answer: 6"])
    resumed = list(executor(model, [adder], config=more).run("q", prior_steps=stored(first)))
    assert adder.calls == [(2, 3), (5, 1)]
    assert final(resumed).text == "6"


def test_a_decision_applies_only_to_the_call_its_request_showed():
    """A run stored before the engine named its calls may hold two calls under one id: the
    decision on the first does not run the second."""
    shown = ActionStep(tool="adder", tool_input={"a": 2, "b": 3}, call_id="c1")
    other = ActionStep(tool="adder", tool_input={"a": 5, "b": 1}, call_id="c1")
    prior = [
        shown,
        ApprovalRequestStep(tool="adder", call_id="c1", tool_input={"a": 2, "b": 3}),
        ApprovalDecisionStep(call_id="c1", approved=True),
        ObservationStep(tool="adder", call_id="c1", text="5"),
        other,
    ]
    adder = GuardedAdder()

    steps = list(
        executor(ScriptedChatModel(["done"]), [adder], mode="tools").run(
            "q", prior_steps=stored(prior)
        )
    )

    assert adder.calls == []
    [error] = [step for step in steps if isinstance(step, ErrorStep)]
    assert error.code == "approval_mismatch"
    assert final(steps).text == "done"
