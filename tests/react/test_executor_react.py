"""The executor in ReAct mode, against the pure-Python scripted model."""

from __future__ import annotations

import pytest

from agents.react.errors import ModelRateLimited, RunCancelled
from agents.react.executor import AgentConfig
from agents.react.types import (
    ActionStep,
    ErrorStep,
    ModelCallRecord,
    ObservationStep,
    ThoughtStep,
)
from tests.react.conftest import drain, final, kinds, without_records
from tests.react.tools import Adder, Big, Broken, Echo, Sleeper

ADD = 'Thought: I should add.\nAction: adder\nAction Input: {"a": 2, "b": 3}'


def test_answer_after_one_tool_call(harness):
    adder = Adder()
    steps = harness.run([ADD, "Thought: I know it.\nFinal Answer: It is 5."], [adder])
    assert kinds(steps) == [
        "model_call",
        "thought",
        "action",
        "observation",
        "model_call",
        "thought",
        "final_answer",
    ]
    thought, action, observation = steps[1], steps[2], steps[3]
    assert thought == ThoughtStep(
        text="I should add.",
        prompt_tokens=steps[0].prompt_tokens,
        completion_tokens=steps[0].completion_tokens,
        duration_ms=steps[0].duration_ms,
    )
    assert (action.tool, action.tool_input) == ("adder", '{"a": 2, "b": 3}')
    assert (observation.text, observation.is_error, observation.call_id) == (
        "5",
        False,
        action.call_id,
    )
    assert adder.calls == [(2, 3)]
    answer = final(steps)
    assert (answer.text, answer.stop_reason) == ("It is 5.", "answer")
    records = [step for step in steps if isinstance(step, ModelCallRecord)]
    assert answer.prompt_tokens == sum(r.prompt_tokens for r in records) > 0
    assert answer.completion_tokens == sum(r.completion_tokens for r in records) > 0


def test_each_call_sends_the_stop_sequence_and_the_growing_scratchpad(harness):
    steps = harness.run([ADD, "Final Answer: 5"], [Adder()], question="What is 2+3?")
    first, second = harness.model.calls
    assert first.stop == ["\nObservation:"]
    assert second.stop == ["\nObservation:"]
    assert first.tools is None
    assert first.messages[-1]["content"].endswith("Question: What is 2+3?\nThought:")
    assert second.messages[-1]["content"].endswith(
        "Question: What is 2+3?\nThought: I should add.\nAction: adder\n"
        'Action Input: {"a": 2, "b": 3}\nObservation: 5\nThought:'
    )
    records = [step for step in steps if isinstance(step, ModelCallRecord)]
    assert [r.messages for r in records] == [first.messages, second.messages]
    assert records[0].options == {"stop": ["\nObservation:"]}
    assert records[0].response_text == ADD


def test_temperature_is_passed_and_recorded(harness):
    steps = harness.run(["Final Answer: hi"], config=AgentConfig(temperature=0.3))
    assert harness.model.calls[0].temperature == 0.3
    assert steps[0].options["temperature"] == 0.3


def test_invented_observation_is_cut_when_the_server_ignores_stop(harness):
    adder = Adder()
    lying = ADD + "\nObservation: 99\nThought: done\nFinal Answer: 99"
    steps = harness.run([lying, "Final Answer: 5"], [adder], honour_stop=False)
    observations = [s for s in steps if isinstance(s, ObservationStep)]
    assert [o.text for o in observations] == ["5"]
    assert final(steps).text == "5"
    assert "99" not in harness.model.calls[1].messages[-1]["content"]


def test_unknown_tool_observation_lists_the_valid_tools(harness):
    steps = harness.run(
        ["Action: multiplier\nAction Input: 2 3", ADD, "Final Answer: 5"], [Adder(), Echo()]
    )
    error = next(s for s in steps if isinstance(s, ErrorStep))
    observation = next(s for s in steps if isinstance(s, ObservationStep))
    assert error.code == "unknown_tool"
    assert observation.is_error
    assert "multiplier" in observation.text
    assert "[adder, echo]" in observation.text
    assert observation.text in harness.model.calls[1].messages[-1]["content"]
    assert final(steps).text == "5"


def test_tool_name_case_is_forgiven(harness):
    steps = harness.run(
        ['Action: ADDER\nAction Input: {"a": 1, "b": 1}', "Final Answer: 2"], [Adder()]
    )
    assert [s.text for s in steps if isinstance(s, ObservationStep)] == ["2"]


def test_a_failing_tool_becomes_an_error_observation(harness):
    steps = harness.run(
        ["Action: broken\nAction Input: notes.txt", "Final Answer: sorry"], [Broken()]
    )
    error = next(s for s in steps if isinstance(s, ErrorStep))
    observation = next(s for s in steps if isinstance(s, ObservationStep))
    assert error.code == "tool_error"
    assert observation.is_error
    assert "RuntimeError: disk on fire while reading 'notes.txt'" in observation.text
    assert observation.text in harness.model.calls[1].messages[-1]["content"]
    assert final(steps).text == "sorry"


def test_input_that_does_not_fit_the_tool_is_reported(harness):
    steps = harness.run(
        ["Action: adder\nAction Input: two and three", "Final Answer: ?"], [Adder()]
    )
    error = next(s for s in steps if isinstance(s, ErrorStep))
    assert error.code == "invalid_arguments"
    assert "adder" in error.message


def test_parse_error_then_recovery(harness):
    adder = Adder()
    steps = harness.run(["I think the answer is 5.", ADD, "Final Answer: 5"], [adder])
    assert kinds(without_records(steps)) == [
        "error",
        "observation",
        "thought",
        "action",
        "observation",
        "final_answer",
    ]
    error, reminder = without_records(steps)[:2]
    assert error.code == "parse_error"
    assert error.model_text == "I think the answer is 5."
    assert reminder.is_error
    assert reminder.tool == ""
    assert "Final Answer:" in reminder.text
    assert "[adder]" in reminder.text
    second_prompt = harness.model.calls[1].messages[-1]["content"]
    assert second_prompt.endswith(
        f"Thought: I think the answer is 5.\nObservation: {reminder.text}\nThought:"
    )
    assert adder.calls == [(2, 3)]
    assert final(steps).text == "5"


def test_missing_action_input_is_a_parse_error_not_an_answer(harness):
    steps = harness.run(["Action: adder", "Final Answer: fine"], [Adder()])
    assert next(s for s in steps if isinstance(s, ErrorStep)).code == "parse_error"
    assert final(steps).text == "fine"


def test_iteration_limit_asks_once_more_without_tools(harness):
    replies = [ADD, ADD, "Thought: I must stop.\nFinal Answer: probably 5"]
    steps = harness.run(replies, [Adder()], config=AgentConfig(max_iterations=2))
    answer = final(steps)
    assert (answer.text, answer.stop_reason) == ("probably 5", "max_iterations")
    last_call = harness.model.calls[-1]
    assert last_call.tools is None
    assert "step limit" in last_call.last_content
    assert len(harness.model.calls) == 3


def test_iteration_limit_with_a_reply_that_is_not_an_answer(harness):
    steps = harness.run(
        [ADD, "Hmm, I am not sure."], [Adder()], config=AgentConfig(max_iterations=1)
    )
    assert (final(steps).text, final(steps).stop_reason) == (
        "Hmm, I am not sure.",
        "max_iterations",
    )


def test_iteration_limit_with_an_empty_reply_gives_a_fixed_answer(harness):
    steps = harness.run([ADD, ADD], [Adder()], config=AgentConfig(max_iterations=1))
    assert final(steps).text == "I stopped before reaching an answer."


def test_time_limit_asks_for_the_answer(harness):
    sleeper = Sleeper(seconds=0.05)
    replies = ["Action: sleeper\nAction Input: a", "Final Answer: rested"]
    steps = harness.run(replies, [sleeper], config=AgentConfig(max_execution_time=0.01))
    answer = final(steps)
    assert (answer.text, answer.stop_reason) == ("rested", "max_execution_time")
    assert sleeper.calls == 1
    assert "time limit" in harness.model.calls[-1].last_content


def test_cancelled_before_the_first_model_call(harness):
    executor = harness.executor(["Final Answer: no"], should_cancel=lambda: True)
    with pytest.raises(RunCancelled):
        list(executor.run("q"))
    assert harness.model.calls == []


def test_cancelled_before_a_tool_call(harness):
    asked = []

    def should_cancel():
        asked.append(1)
        return len(asked) >= 3  # before the model call, while streaming, then the tool

    adder = Adder()
    executor = harness.executor([ADD, "Final Answer: 5"], [adder], should_cancel=should_cancel)
    steps = []
    with pytest.raises(RunCancelled):
        drain(executor.run("q"), steps)
    assert kinds(steps) == ["model_call", "thought", "action"]
    assert adder.calls == []


def test_cancelled_while_the_reply_streams(harness):
    asked = []

    def should_cancel():
        asked.append(1)
        return len(asked) >= 2  # the check before the call passes, the first chunk's fails

    executor = harness.executor(["Final Answer: a long answer"], should_cancel=should_cancel)
    with pytest.raises(RunCancelled):
        list(executor.run("q"))
    assert harness.model.calls[0].interrupted
    assert harness.deltas == []


def test_cancelled_while_waiting_for_a_tool(harness):
    sleeper = Sleeper(seconds=30)
    executor = harness.executor(
        ["Action: sleeper\nAction Input: a", "Final Answer: x"],
        [sleeper],
        should_cancel=sleeper.started.is_set,
        stream=False,
    )
    try:
        with pytest.raises(RunCancelled):
            list(executor.run("q"))
    finally:
        sleeper.release.set()
    assert sleeper.calls == 1
    assert len(harness.model.calls) == 1


def test_a_slow_tool_times_out_and_does_not_hold_up_the_next_call(harness):
    sleeper = Sleeper(seconds=30, timeout_seconds=0.01)
    echo = Echo()
    replies = [
        "Action: sleeper\nAction Input: a",
        "Action: echo\nAction Input: still here",
        "Final Answer: it hung",
    ]
    try:
        steps = harness.run(replies, [sleeper, echo])
        still_sleeping = not sleeper.finished.is_set()
    finally:
        sleeper.release.set()
    error = next(s for s in steps if isinstance(s, ErrorStep))
    observations = [s for s in steps if isinstance(s, ObservationStep)]
    assert error.code == "tool_timeout"
    assert observations[0].is_error
    assert "0.01 seconds" in observations[0].text
    assert still_sleeping
    assert (observations[1].text, observations[1].is_error) == ("echo: still here", False)
    assert final(steps).text == "it hung"


def test_long_observations_are_cut_with_a_note(harness):
    steps = harness.run(
        ['Action: big\nAction Input: {"size": 100}', "Final Answer: long"],
        [Big()],
        config=AgentConfig(max_observation_chars=10),
    )
    observation = next(s for s in steps if isinstance(s, ObservationStep))
    assert observation.truncated
    assert observation.text == "x" * 10 + "\n[cut: showing 10 of 100 characters]"
    assert observation.text in harness.model.calls[1].messages[-1]["content"]


def test_return_direct_tool_ends_the_run_with_its_output(harness):
    echo = Echo(return_direct=True)
    steps = harness.run(["Action: echo\nAction Input: hello"], [echo])
    answer = final(steps)
    assert (answer.text, answer.stop_reason) == ("echo: hello", "return_direct")
    assert len(harness.model.calls) == 1
    assert "".join(harness.deltas) == "echo: hello"


def test_return_direct_tool_that_fails_lets_the_model_go_on(harness):
    broken = Broken()
    broken.return_direct = True
    steps = harness.run(["Action: broken\nAction Input: x", "Final Answer: fine"], [broken])
    assert (final(steps).text, final(steps).stop_reason) == ("fine", "answer")


def test_model_errors_propagate_after_their_record(harness):
    executor = harness.executor([ModelRateLimited("slow down", status_code=429)])
    steps = []
    with pytest.raises(ModelRateLimited):
        drain(executor.run("q"), steps)
    assert len(steps) == 1
    assert isinstance(steps[0], ModelCallRecord)
    assert "slow down" in steps[0].error


def test_streamed_deltas_are_the_answer_without_the_thought(harness):
    reply = "Thought: the secret reasoning\nFinal Answer: The answer\nis 5."
    steps = harness.run([ADD, reply], [Adder()], chunk_size=3)
    assert "".join(harness.deltas) == "The answer\nis 5." == final(steps).text
    assert len(harness.deltas) > 1
    assert not any("secret" in delta or "add" in delta for delta in harness.deltas)


def test_answer_is_sent_whole_when_it_could_not_be_streamed(harness):
    steps = harness.run([ADD, ADD], [Adder()], config=AgentConfig(max_iterations=1), chunk_size=2)
    assert "".join(harness.deltas) == final(steps).text


def test_chinese_labels_end_to_end(harness):
    replies = [
        '思考：我需要把两个数相加。\n行动：adder\n行动输入：{"a": 2, "b": 3}\n观察：编造的结果',
        "思考：我知道答案了。\n最终答案：结果是 5。",
    ]
    steps = harness.run(replies, [Adder()], label_set="zh", question="2 加 3 等于多少？")
    first, second = harness.model.calls
    assert first.stop[0] == "\n观察："
    assert "行动：要使用的工具，应该是[adder]中的一个" in first.last_content
    assert first.last_content.endswith("问题：2 加 3 等于多少？\n思考：")
    assert second.last_content.endswith(
        '思考：我需要把两个数相加。\n行动：adder\n行动输入：{"a": 2, "b": 3}\n观察：5\n思考：'
    )
    assert [s.text for s in steps if isinstance(s, ObservationStep)] == ["5"]
    assert final(steps).text == "结果是 5。"
    assert "".join(harness.deltas) == "结果是 5。"


def test_chinese_notes_to_the_model(harness):
    steps = harness.run(["没有格式的回复", "最终答案：好"], [Adder()], label_set="zh")
    reminder = next(s for s in steps if isinstance(s, ObservationStep))
    assert "最终答案：" in reminder.text


def test_history_and_memory_summary_reach_the_prompt(harness):
    executor = harness.executor(["Final Answer: Alice"])
    history = [
        {"role": "user", "content": "My name is Alice."},
        {"role": "assistant", "content": "Nice to meet you, Alice."},
    ]
    list(executor.run("What is my name?", history=history, memory_summary="We met today."))
    prompt = harness.model.calls[0].last_content
    assert "User: My name is Alice.\nAssistant: Nice to meet you, Alice." in prompt
    assert "We met today." in prompt
    assert prompt.index("We met today.") < prompt.index("User: My name is Alice.")


def test_duplicate_tool_names_are_refused(harness):
    with pytest.raises(ValueError, match="adder"):
        harness.executor([], [Adder(), Adder()])


def test_action_steps_keep_their_order_and_ids(harness):
    steps = harness.run([ADD, ADD, "Final Answer: 5"], [Adder()])
    actions = [s for s in steps if isinstance(s, ActionStep)]
    assert [a.call_id for a in actions] == ["call-1", "call-2"]
