"""Format repair that adapts: a ReAct run that keeps breaking the format goes native."""

from __future__ import annotations

from agents.react.executor import PARSE_ERRORS_BEFORE_NATIVE, AgentConfig, AgentExecutor
from agents.react.prompt import PromptConfig
from agents.react.testing import ScriptedChatModel, tool_calls
from agents.react.types import (
    ErrorStep,
    ModelCallRecord,
    ModeSwitchStep,
    ObservationStep,
    step_from_event,
    step_to_event,
)
from tests.react.conftest import final, kinds, without_records
from tests.react.tools import Adder

BAD = "I think the answer is 5 but I will not say it properly."
NATIVE = AgentConfig(supports_tool_calling=True)


def test_three_parse_errors_switch_a_capable_model_to_native_mode(harness):
    replies = [BAD] * PARSE_ERRORS_BEFORE_NATIVE + [
        tool_calls(("adder", '{"a": 2, "b": 3}')),
        "It is 5.",
    ]
    steps = harness.run(replies, [Adder()], config=NATIVE)
    visible = without_records(steps)
    assert kinds(visible) == [
        "error",
        "observation",
        "error",
        "observation",
        "error",
        "observation",
        "mode_switch",
        "action",
        "observation",
        "final_answer",
    ]
    switch = visible[6]
    assert switch == ModeSwitchStep(from_mode="react", to_mode="tools", parse_errors=3)
    assert final(steps).text == "It is 5."
    calls = harness.model.calls
    assert all(call.stop and call.tools is None for call in calls[:3])
    assert calls[3].stop is None
    assert calls[3].tools == [Adder().openai_schema()]
    # The native call shows the model its unusable replies and what it was told.
    assert [m["role"] for m in calls[3].messages][-6:] == ["assistant", "user"] * 3
    assert calls[3].messages[-2]["content"] == BAD


def test_no_switch_without_tool_calling_support(harness):
    replies = [BAD] * 4 + ["Final Answer: 5"]
    steps = harness.run(replies, [Adder()])
    assert not any(isinstance(step, ModeSwitchStep) for step in steps)
    assert final(steps).text == "5"


def test_errors_that_are_not_parse_errors_do_not_count(harness):
    unknown = "Action: nosuchtool\nAction Input: 1"
    steps = harness.run([unknown] * 3 + ["Final Answer: 5"], [Adder()], config=NATIVE)
    assert not any(isinstance(step, ModeSwitchStep) for step in steps)


def test_the_switch_step_round_trips_as_an_event():
    step = ModeSwitchStep(from_mode="react", to_mode="tools", parse_errors=3)
    event = step_to_event(step)
    assert event["kind"] == "mode_switch"
    assert step_from_event(event) == step


def _executor(replies) -> tuple[AgentExecutor, ScriptedChatModel]:
    model = ScriptedChatModel(replies)
    executor = AgentExecutor(model=model, tools=[Adder()], prompt=PromptConfig(), config=NATIVE)
    return executor, model


def test_a_resumed_run_stays_native_after_the_switch():
    executor, _ = _executor([BAD] * 3 + [tool_calls(("adder", '{"a": 1, "b": 1}')), "two"])
    stored = []
    for step in executor.run("q"):
        stored.append(step)
        if isinstance(step, ModeSwitchStep):
            break
    resumed, model = _executor(["It is two."])
    steps = list(resumed.run("q", prior_steps=stored))
    assert final(steps).text == "It is two."
    assert model.calls[0].stop is None
    assert model.calls[0].tools is not None
    # The switch was announced once, before the crash; the resumed run does not repeat it.
    assert not any(isinstance(step, ModeSwitchStep) for step in steps)


def test_a_crash_between_the_third_error_and_the_switch_switches_on_resume():
    executor, _ = _executor([BAD] * 3)
    stored = []
    for step in executor.run("q"):
        if isinstance(step, ModeSwitchStep):
            break
        stored.append(step)
    assert sum(isinstance(s, ErrorStep) for s in stored) == 3
    assert isinstance(stored[-1], ObservationStep)
    resumed, model = _executor(["Native answer."])
    steps = list(resumed.run("q", prior_steps=stored))
    assert isinstance(without_records(steps)[0], ModeSwitchStep)
    assert final(steps).text == "Native answer."
    assert model.calls[0].tools is not None
    assert sum(isinstance(s, ModelCallRecord) for s in steps) == 1
