"""The executor in native tool-calling mode (OpenAI ``tools`` / ``tool_calls``)."""

from __future__ import annotations

import threading

import pytest

from agents.react.executor import AgentConfig
from agents.react.testing import tool_calls
from agents.react.tools import Tool
from agents.react.transcript import ToolRun, Turn, native_messages
from agents.react.types import ActionStep, ErrorStep, ObservationStep, ThoughtStep
from tests.react.conftest import final, kinds, without_records
from tests.react.tools import Adder, Broken, Echo


class Rendezvous(Tool):
    """Returns only once two calls are inside it at the same time (or fails after 5 s)."""

    name = "rendezvous"
    description = "Meets another call."

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=5)

    def run(self, *, text: str) -> str:
        self.barrier.wait()
        return f"met {text}"


def test_tool_call_then_answer(harness):
    adder = Adder()
    replies = [tool_calls(("adder", '{"a": 2, "b": 3}'), text="Adding."), "The sum is 5."]
    steps = harness.run(replies, [adder], mode="tools", question="2+3?")
    assert kinds(without_records(steps)) == ["thought", "action", "observation", "final_answer"]
    thought, action, observation, answer = without_records(steps)
    assert thought.text == "Adding."
    # The engine names the call; the model's id is kept to pair the result in the messages.
    assert (action.tool, action.tool_input) == ("adder", {"a": 2, "b": 3})
    assert (action.call_id, action.model_call_id) == ("call-1", "call_1")
    assert (observation.text, observation.call_id) == ("5", "call-1")
    assert (answer.text, answer.stop_reason) == ("The sum is 5.", "answer")
    assert "".join(harness.deltas) == "The sum is 5."

    first, second = harness.model.calls
    assert first.stop is None
    assert first.tools == [adder.openai_schema()]
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.messages[-1]["content"] == "2+3?"
    assert second.messages[2:] == [
        {
            "role": "assistant",
            "content": "Adding.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "adder", "arguments": '{"a": 2, "b": 3}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    ]


def test_parallel_calls_run_together_and_are_reported_one_by_one(harness):
    replies = [
        tool_calls(("rendezvous", '{"text": "a"}'), ("rendezvous", '{"text": "b"}')),
        "Both met.",
    ]
    steps = harness.run(replies, [Rendezvous()], mode="tools")
    assert kinds(without_records(steps)) == [
        "action",
        "action",
        "observation",
        "observation",
        "final_answer",
    ]
    observations = [s for s in steps if isinstance(s, ObservationStep)]
    assert [(o.call_id, o.text, o.is_error) for o in observations] == [
        ("call-1", "met a", False),
        ("call-2", "met b", False),
    ]
    tool_messages = [m for m in harness.model.calls[1].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_1", "call_2"]


def test_invalid_json_arguments_become_an_error_the_model_sees(harness):
    adder = Adder()
    replies = [
        tool_calls(("adder", '{"a": 2, "b": ')),
        tool_calls(("adder", '{"a": 2, "b": 3}')),
        "5",
    ]
    steps = harness.run(replies, [adder], mode="tools")
    error = next(s for s in steps if isinstance(s, ErrorStep))
    first_observation = next(s for s in steps if isinstance(s, ObservationStep))
    assert error.code == "invalid_arguments"
    assert first_observation.is_error
    assert "not valid JSON" in first_observation.text
    assert first_observation.text.endswith(': {"a": 2, "b": ')  # what the model wrote
    action = next(s for s in steps if isinstance(s, ActionStep))
    assert action.tool_input == '{"a": 2, "b": '
    history = harness.model.calls[1].messages
    tool_message = next(m for m in history if m["role"] == "tool")
    assert tool_message["content"] == first_observation.text
    # Sent back as valid JSON: some servers refuse a history with broken arguments.
    (sent_call,) = next(m for m in history if m.get("tool_calls"))["tool_calls"]
    assert sent_call["function"]["arguments"] == "{}"
    assert adder.calls == [(2, 3)]
    assert final(steps).text == "5"


def test_arguments_failing_the_schema_become_an_error(harness):
    steps = harness.run(
        [
            tool_calls(
                ("adder", '{"a": "two", "b": 3}'), ("adder", '{"a": 1}'), ("adder", "[1, 2]")
            ),
            "gave up",
        ],
        [Adder()],
        mode="tools",
    )
    errors = [s for s in steps if isinstance(s, ErrorStep)]
    assert [e.code for e in errors] == ["invalid_arguments"] * 3
    assert "'a' must be a integer" in errors[0].message
    assert "missing" in errors[1].message
    assert "JSON object" in errors[2].message


def test_unknown_tool_and_failing_tool(harness):
    steps = harness.run(
        [tool_calls(("nope", "{}"), ("broken", '{"text": "x"}'), ("echo", '{"text": "hi"}')), "ok"],
        [Broken(), Echo()],
        mode="tools",
    )
    errors = [s.code for s in steps if isinstance(s, ErrorStep)]
    observations = [(s.is_error, s.text) for s in steps if isinstance(s, ObservationStep)]
    assert errors == ["unknown_tool", "tool_error"]
    assert observations[0][0]
    assert "[broken, echo]" in observations[0][1]
    assert observations[1][0]
    assert "disk on fire" in observations[1][1]
    assert observations[2] == (False, "echo: hi")


def test_empty_arguments_mean_no_arguments(harness):
    class Clock(Tool):
        name = "clock"
        description = "The time."

        def run(self) -> str:
            return "noon"

    steps = harness.run([tool_calls(("clock", "")), "It is noon."], [Clock()], mode="tools")
    assert [s.text for s in steps if isinstance(s, ObservationStep)] == ["noon"]


def test_empty_reply_is_reported_and_the_model_asked_again(harness):
    steps = harness.run(["", "Hello."], mode="tools")
    error = next(s for s in steps if isinstance(s, ErrorStep))
    assert error.code == "empty_reply"
    second = harness.model.calls[1].messages
    assert second[-2:] == [
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Your reply was empty. Answer the question or call a tool."},
    ]
    assert final(steps).text == "Hello."


def test_iteration_limit_last_call_has_no_tools(harness):
    call = tool_calls(("echo", '{"text": "again"}'))
    steps = harness.run(
        [call, call, "Enough: again."],
        [Echo()],
        mode="tools",
        config=AgentConfig(max_iterations=2),
    )
    answer = final(steps)
    assert (answer.text, answer.stop_reason) == ("Enough: again.", "max_iterations")
    last = harness.model.calls[-1]
    assert last.tools is None
    assert "step limit" in last.messages[-1]["content"]
    assert [m["role"] for m in last.messages[-3:]] == ["assistant", "tool", "user"]


def test_return_direct_in_native_mode(harness):
    steps = harness.run(
        [tool_calls(("echo", '{"text": "hi"}'))], [Echo(return_direct=True)], mode="tools"
    )
    assert (final(steps).text, final(steps).stop_reason) == ("echo: hi", "return_direct")


def test_answer_label_is_dropped_from_a_native_answer(harness):
    steps = harness.run(["Final Answer: 42"], mode="tools")
    assert final(steps).text == "42"


def test_thought_text_never_streams_as_the_answer(harness):
    replies = [tool_calls(("echo", '{"text": "x"}'), text="Secret plan."), "Done."]
    harness.run(replies, [Echo()], mode="tools", chunk_size=2)
    assert harness.deltas == ["Done."]


def test_tool_schema_follows_type_hints(harness):
    harness.run(["hi"], [Adder()], mode="tools")
    (schema,) = harness.model.calls[0].tools
    assert schema["function"]["parameters"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }


def test_no_thought_step_for_silent_tool_calls(harness):
    steps = harness.run([tool_calls(("echo", '{"text": "x"}')), "ok"], [Echo()], mode="tools")
    assert not any(isinstance(s, ThoughtStep) for s in steps)


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ('{"a": 2, "b": 3}', '{"a": 2, "b": 3}'),
        ("[2, 3]", "{}"),
        ("", "{}"),
        ("  ", "{}"),
    ],
    ids=["an-object", "a-list", "nothing", "blanks"],
)
def test_the_next_call_shows_the_model_its_arguments_as_a_json_object(harness, written, shown):
    """Valid arguments go back as the model wrote them; anything that is not a JSON object
    goes back as ``{}`` (some servers refuse a history that holds it), and the observation
    quotes what was written."""
    harness.run([tool_calls(("adder", written)), "done"], [Adder()], mode="tools")

    history = harness.model.calls[1].messages
    (sent_call,) = next(m for m in history if m.get("tool_calls"))["tool_calls"]
    assert sent_call["function"]["arguments"] == shown


def test_arguments_held_as_an_object_are_shown_with_their_characters_as_written():
    """An earlier ReAct turn's JSON input (after a switch to native calls) goes back as JSON
    with its Chinese as written, not as escapes the model never wrote."""
    action = ActionStep(tool="echo", tool_input={"text": "北京"}, call_id="call-1")
    turn = Turn(runs=[ToolRun(action, ObservationStep(tool="echo", call_id="call-1", text="ok"))])

    (assistant, tool_message) = native_messages([turn])

    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"text": "北京"}'
    assert tool_message["content"] == "ok"


def test_an_earlier_react_input_written_as_json_goes_back_as_written():
    """After a switch to native calls, an earlier ReAct turn's Action Input that is a JSON
    object in text is shown as those arguments, not emptied."""
    action = ActionStep(tool="adder", tool_input='{"a": 2, "b": 3}', call_id="call-1")
    turn = Turn(runs=[ToolRun(action, ObservationStep(tool="adder", call_id="call-1", text="5"))])

    (assistant, _) = native_messages([turn])

    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"a": 2, "b": 3}'
