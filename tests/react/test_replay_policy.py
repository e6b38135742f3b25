"""The replay's tool policy in the engine: recorded calls answered from the record (each
once, in order, matched on the tool and the canonical JSON of the checked arguments), an
unrecorded call run or answered by the setting, and a tool that needs approval never run
and never waited for."""

from __future__ import annotations

import pytest

from agents.react.executor import AgentExecutor
from agents.react.prompt import PromptConfig
from agents.react.replay import RecordedCall, RecordedCalls, recorded_calls
from agents.react.testing import ScriptedChatModel, tool_calls
from agents.react.types import ActionStep, ErrorStep, ObservationStep
from tests.react.conftest import final
from tests.react.tools import Adder, Echo

DONE = "Thought: done\nFinal Answer: done"


class ReadingEcho(Echo):
    read_only = True


class GuardedEcho(ReadingEcho):
    name = "guarded"
    needs_approval = True


def _run(replies, tools, policy, *, mode="react"):
    engine = AgentExecutor(
        model=ScriptedChatModel(replies),
        tools=tools,
        prompt=PromptConfig(mode=mode),
        tool_policy=policy,
    )
    return list(engine.run("q"))


def _observations(steps):
    return [step.text for step in steps if isinstance(step, ObservationStep)]


def _action(tool, tool_input):
    return f"Thought: call\nAction: {tool}\nAction Input: {tool_input}"


def test_identical_calls_get_the_recorded_observations_once_each_in_order():
    adder = Adder()
    record = [
        RecordedCall("adder", '{"a": 2, "b": 3}', "first five"),
        RecordedCall("adder", {"b": 3, "a": 2}, "second five"),
    ]
    policy = RecordedCalls(record, run_unrecorded_read_only=True)

    steps = _run(
        [
            _action("adder", '{"b":3,"a":2}'),
            _action("ADDER", '{"a": 2, "b": 3}'),
            _action("adder", '{"a": 2, "b": 3}'),
            DONE,
        ],
        [adder],
        policy,
    )

    assert adder.calls == []  # nothing ran, not even the third (the adder is not read-only)
    assert _observations(steps)[:2] == ["first five", "second five"]
    errors = [step for step in steps if isinstance(step, ErrorStep)]
    assert [error.code for error in errors] == ["not_recorded"]
    assert "not recorded in the original run" in _observations(steps)[2]
    assert final(steps).text == "done"


def test_native_calls_match_the_react_record():
    adder = Adder()
    policy = RecordedCalls(
        [RecordedCall("adder", '{"a": 1, "b": 1}', "two")], run_unrecorded_read_only=False
    )
    steps = _run(
        [tool_calls(("adder", '{"b": 1, "a": 1}')), "It is two."], [adder], policy, mode="tools"
    )
    assert _observations(steps) == ["two"]
    assert adder.calls == []


@pytest.mark.parametrize("run_unrecorded_read_only", [True, False])
def test_an_unrecorded_read_only_call_runs_only_when_the_setting_says(run_unrecorded_read_only):
    echo = ReadingEcho()
    policy = RecordedCalls([], run_unrecorded_read_only=run_unrecorded_read_only)

    steps = _run([_action("echo", "hi"), DONE], [echo], policy)

    if run_unrecorded_read_only:
        assert echo.inputs == ["hi"]
        assert _observations(steps) == ["echo: hi"]
    else:
        assert echo.inputs == []
        assert "not recorded" in _observations(steps)[0]


def test_a_tool_needing_approval_never_runs_and_nobody_is_asked():
    guarded = GuardedEcho()
    policy = RecordedCalls([], run_unrecorded_read_only=True)  # it is even read-only

    steps = _run([_action("guarded", "x"), DONE], [guarded], policy)  # no AwaitingApproval

    assert guarded.inputs == []
    assert [step.code for step in steps if isinstance(step, ErrorStep)] == ["not_recorded"]
    assert final(steps).text == "done"


def test_a_recorded_error_comes_back_as_an_error_with_its_code():
    steps = [
        ActionStep(tool="adder", tool_input='{"a": 1, "b": 2}', call_id="call-1"),
        ErrorStep(code="tool_timeout", message="too slow"),
        ObservationStep(tool="adder", call_id="call-1", text="too slow", is_error=True),
    ]
    policy = RecordedCalls(recorded_calls(steps), run_unrecorded_read_only=False)

    replayed = _run([_action("adder", '{"a": 1, "b": 2}'), DONE], [Adder()], policy)

    errors = [step for step in replayed if isinstance(step, ErrorStep)]
    assert [(error.code, error.message) for error in errors] == [("tool_timeout", "too slow")]
    observation = next(step for step in replayed if isinstance(step, ObservationStep))
    assert observation.is_error
    assert observation.text == "too slow"


def test_a_resumed_replay_skips_what_its_own_steps_already_used():
    adder = Adder()
    policy = RecordedCalls(
        [
            RecordedCall("adder", '{"a": 2, "b": 3}', "first"),
            RecordedCall("adder", '{"a": 2, "b": 3}', "second"),
        ],
        run_unrecorded_read_only=False,
    )
    already = [
        ActionStep(tool="adder", tool_input='{"a": 2, "b": 3}', call_id="call-1"),
        ObservationStep(tool="adder", call_id="call-1", text="first"),
    ]
    policy.skip_answered(already, {"adder": adder}.get)

    steps = _run([_action("adder", '{"a": 2, "b": 3}'), DONE], [adder], policy)

    assert _observations(steps) == ["second"]
