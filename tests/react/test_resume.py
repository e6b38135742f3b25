"""Resuming a run from the steps a crashed attempt stored: no tool runs twice."""

from __future__ import annotations

import json

from agents.react.executor import AgentConfig, AgentExecutor
from agents.react.prompt import PromptConfig
from agents.react.testing import ScriptedChatModel, tool_calls
from agents.react.types import (
    ActionStep,
    FinalAnswerStep,
    ModelCallRecord,
    ObservationStep,
    step_from_event,
    step_to_event,
)
from tests.react.conftest import final, kinds
from tests.react.tools import Adder, Counter

ADD = 'Thought: add\nAction: adder\nAction Input: {"a": 2, "b": 3}'
ADD_MORE = 'Thought: once more\nAction: adder\nAction Input: {"a": 5, "b": 1}'


def stored(steps):
    """What the pipeline stores as step events, read back as it reads them."""
    return [
        step_from_event(json.loads(json.dumps(step_to_event(step))))
        for step in steps
        if not isinstance(step, ModelCallRecord | FinalAnswerStep)
    ]


def executor(model, tools, *, mode="react", config=None):
    return AgentExecutor(
        model=model, tools=tools, prompt=PromptConfig(mode=mode), config=config or AgentConfig()
    )


def test_resume_rebuilds_the_same_scratchpad_without_calling_tools_again():
    replies = ["Hmm.", ADD, ADD_MORE, "Final Answer: 6"]
    original_model = ScriptedChatModel(replies)
    original = list(executor(original_model, [Adder()]).run("q"))
    # The crash came right after the second tool's observation was stored.
    second_observation = [i for i, s in enumerate(original) if isinstance(s, ObservationStep)][2]
    prior = stored(original[: second_observation + 1])

    adder = Adder()
    model = ScriptedChatModel(["Final Answer: 6"])
    resumed = list(executor(model, [adder]).run("q", prior_steps=prior))

    assert adder.calls == []
    assert kinds(resumed) == ["model_call", "final_answer"]
    assert model.calls[0].messages == original_model.calls[3].messages
    assert final(resumed).text == "6"


def test_an_action_without_its_observation_is_run_again():
    original = list(executor(ScriptedChatModel([ADD, "Final Answer: 5"]), [Adder()]).run("q"))
    action_index = next(i for i, s in enumerate(original) if isinstance(s, ActionStep))
    prior = stored(original[: action_index + 1])

    adder = Adder()
    model = ScriptedChatModel(["Final Answer: 5"])
    resumed = list(executor(model, [adder]).run("q", prior_steps=prior))

    assert adder.calls == [(2, 3)]
    assert kinds(resumed) == ["observation", "model_call", "final_answer"]
    assert resumed[0].call_id == original[action_index].call_id
    assert "Observation: 5\nThought:" in model.calls[0].last_content


def test_new_actions_after_a_resume_get_new_ids():
    original = list(executor(ScriptedChatModel([ADD, "Final Answer: 5"]), [Adder()]).run("q"))
    prior = stored(
        original[: next(i for i, s in enumerate(original) if s.kind == "observation") + 1]
    )
    resumed = list(
        executor(ScriptedChatModel([ADD_MORE, "Final Answer: 6"]), [Adder()]).run(
            "q", prior_steps=prior
        )
    )
    assert [s.call_id for s in resumed if isinstance(s, ActionStep)] == ["call-2"]


def test_native_parallel_calls_resume_only_the_missing_one():
    replies = [
        tool_calls(("counter", '{"text": "a"}'), ("counter", '{"text": "b"}'), text="Both."),
        "Counted.",
    ]
    original_model = ScriptedChatModel(replies)
    original = list(executor(original_model, [Counter()], mode="tools").run("q"))
    first_observation = next(i for i, s in enumerate(original) if s.kind == "observation")
    prior = stored(original[: first_observation + 1])

    counter = Counter()
    model = ScriptedChatModel(["Counted."])
    resumed = list(executor(model, [counter], mode="tools").run("q", prior_steps=prior))

    assert counter.calls == ["b"]
    assert kinds(resumed) == ["observation", "model_call", "final_answer"]
    assert model.calls[0].messages == original_model.calls[1].messages


def test_prior_turns_count_towards_the_iteration_limit():
    original = list(executor(ScriptedChatModel([ADD, ADD, "Final Answer: 5"]), [Adder()]).run("q"))
    prior = stored(original)
    model = ScriptedChatModel(["Final Answer: 5"])
    resumed = list(
        executor(model, [Adder()], config=AgentConfig(max_iterations=2)).run("q", prior_steps=prior)
    )
    assert final(resumed).stop_reason == "max_iterations"
    assert len(model.calls) == 1


def test_a_finished_run_is_not_run_again():
    original = list(executor(ScriptedChatModel(["Final Answer: done"]), []).run("q"))
    model = ScriptedChatModel([])
    resumed = list(executor(model, []).run("q", prior_steps=original))
    assert resumed == [original[-1]]
    assert model.calls == []


def test_a_parse_error_whose_note_was_not_stored_gets_the_same_note():
    original_model = ScriptedChatModel(["Just text.", "Final Answer: ok"])
    original = list(executor(original_model, []).run("q"))
    error_index = next(i for i, s in enumerate(original) if s.kind == "error")
    note = original[error_index + 1]
    prior = stored(original[: error_index + 1])

    model = ScriptedChatModel(["Final Answer: ok"])
    resumed = list(executor(model, []).run("q", prior_steps=prior))

    assert resumed[0] == note
    assert model.calls[0].messages == original_model.calls[1].messages
