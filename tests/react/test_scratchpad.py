"""The scratchpad (ReAct mode): every model call of a run sees every step before it, not only
the last one, and a resumed run shows the model the same text the live run would have."""

from __future__ import annotations

import json

from agents.react.transcript import transcript_from_steps
from agents.react.types import (
    ActionStep,
    FinalAnswerStep,
    ModelCallRecord,
    ObservationStep,
    step_from_event,
    step_to_event,
)
from tests.react.conftest import final
from tests.react.tools import Adder, Echo

FIRST = 'Thought: add two and three\nAction: adder\nAction Input: {"a": 2, "b": 3}'
SECOND = 'Thought: now add forty\nAction: adder\nAction Input: {"a": 40, "b": 2}'
THIRD = 'Thought: and one more\nAction: adder\nAction Input: {"a": 1, "b": 1}'


def test_the_third_model_call_still_sees_the_first_observation(harness):
    steps = harness.run([FIRST, SECOND, "Thought: done\nFinal Answer: 5 and 42"], [Adder()])

    assert final(steps).text == "5 and 42"
    third = harness.model.calls[2].last_content
    # Both turns, in the order they happened, each with its own observation.
    first_turn = third.index("add two and three")
    first_seen = third.index("Observation: 5")
    second_turn = third.index("now add forty")
    second_seen = third.index("Observation: 42")
    assert first_turn < first_seen < second_turn < second_seen
    assert third.count("Action: adder") == 2
    assert third.rstrip().endswith("Thought:")


def test_a_resumed_run_shows_the_model_every_earlier_turn(harness):
    live = harness.run([FIRST, SECOND, THIRD, "Final Answer: 2"], [Adder()])
    fourth_live = harness.model.calls[3].messages
    # The steps as stored, up to the fourth model call, handed to a fresh run.
    stored = [
        step_from_event(json.loads(json.dumps(step_to_event(step))))
        for step in live
        if not isinstance(step, ModelCallRecord | FinalAnswerStep)
    ]

    executor = harness.executor(["Final Answer: 2"], [Adder()])
    resumed = list(executor.run("q", prior_steps=stored))

    assert final(resumed).text == "2"
    assert harness.model.calls[0].messages == fourth_live
    for said in ("Observation: 5", "Observation: 42", "Observation: 2"):
        assert said in harness.model.calls[0].last_content


def test_a_resumed_batch_pairs_each_observation_with_its_own_call():
    """The calls of a batch run side by side: whatever order their observations were stored
    in, a resumed run shows the model each result under its own call."""
    stored_steps = [
        ActionStep(tool="adder", tool_input={"a": 1, "b": 1}, call_id="call-1"),
        ActionStep(tool="adder", tool_input={"a": 2, "b": 3}, call_id="call-2"),
        ObservationStep(tool="adder", call_id="call-2", text="5"),
        ObservationStep(tool="adder", call_id="call-1", text="2"),
    ]

    [turn] = transcript_from_steps(stored_steps).turns

    assert [(run.action.call_id, run.observation.text) for run in turn.runs] == [
        ("call-1", "2"),
        ("call-2", "5"),
    ]


def test_a_json_action_input_is_shown_back_as_the_model_wrote_it(harness):
    """A JSON action whose input is an object: the next call's scratchpad shows that object
    as JSON, its Chinese as written (not escaped, not lost)."""
    reply = '{"action": "echo", "action_input": {"text": "北京"}}'

    harness.run([reply, "Final Answer: done"], [Echo()])

    scratchpad = harness.model.calls[1].last_content
    assert 'Action Input: {"text": "北京"}\nObservation: echo: 北京' in scratchpad


def test_an_action_without_a_thought_adds_no_blank_thought_to_the_scratchpad(harness):
    reply = 'Action: adder\nAction Input: {"a": 2, "b": 3}'

    harness.run([reply, "Final Answer: 5"], [Adder()])

    second = harness.model.calls[1].last_content
    shown = 'Thought:\nAction: adder\nAction Input: {"a": 2, "b": 3}\nObservation: 5\nThought:'
    assert second.endswith(shown)


def test_a_resumed_run_numbers_its_model_calls_after_the_stored_ones(harness):
    """A worker died after the second model call was recorded, before its steps were: the
    resumed run's call is the third, so the inspector shows the calls in order."""
    live = harness.run([FIRST, SECOND, "Final Answer: 5 and 42"], [Adder()])
    second_record = [i for i, step in enumerate(live) if isinstance(step, ModelCallRecord)][1]
    stored = [
        step_from_event(json.loads(json.dumps(step_to_event(step))))
        for step in live[: second_record + 1]
    ]

    resumed = list(
        harness.executor([SECOND, "Final Answer: 5 and 42"], [Adder()]).run("q", prior_steps=stored)
    )

    assert [step.index for step in resumed if isinstance(step, ModelCallRecord)] == [2, 3]
    assert final(resumed).text == "5 and 42"


def test_calls_without_a_thought_in_a_row_stay_separate_replies():
    """Two replies that each made a call and said nothing else: a resumed run shows the model
    two replies, each with its result, not one reply of two calls."""
    stored_steps = [
        ActionStep(tool="adder", tool_input={"a": 1, "b": 1}, call_id="call-1"),
        ObservationStep(tool="adder", call_id="call-1", text="2"),
        ActionStep(tool="adder", tool_input={"a": 2, "b": 3}, call_id="call-2"),
        ObservationStep(tool="adder", call_id="call-2", text="5"),
    ]

    turns = transcript_from_steps(stored_steps).turns

    assert [[run.action.call_id for run in turn.runs] for turn in turns] == [
        ["call-1"],
        ["call-2"],
    ]
