"""The parser's rules from issue 14, one test (or more) per rule stated in parser.py.

Each of these failed before the rule was put in place.
"""

from __future__ import annotations

import pytest

from agents.react import parser as parser_module
from agents.react.errors import ParseError
from agents.react.parser import (
    AnswerStream,
    ThoughtStream,
    parse,
)
from agents.react.types import ErrorStep, ObservationStep
from tests.react.conftest import final, without_records
from tests.react.test_parser import action, answer, stream
from tests.react.tools import Echo

# Rule: a label in the middle of a line counts only in the cases the docstring lists, so a
# thought that mentions the answer label neither ends the run nor hides the action after it.


def test_a_thought_mentioning_the_answer_label_keeps_its_action():
    parsed = action(
        "Thought: I will search first, then give my Final Answer: once I know.\n"
        "Action: search\nAction Input: weather in Paris"
    )
    assert (parsed.tool, parsed.tool_input) == ("search", "weather in Paris")
    assert parsed.thought.endswith("then give my Final Answer: once I know.")


def test_the_mention_does_not_end_a_run(harness):
    reply = (
        "Thought: I'll check, then write my Final Answer: after that.\n"
        "Action: echo\nAction Input: hi"
    )
    steps = harness.run([reply, "Final Answer: done"], [Echo()])
    observations = [s for s in steps if isinstance(s, ObservationStep)]
    assert [o.text for o in observations] == ["echo: hi"]
    assert final(steps).text == "done"
    assert "".join(harness.deltas) == "done"


def test_a_one_line_answer_still_counts_when_nothing_else_is_there():
    assert answer("Thought: easy. Final Answer: 42").answer == "42"


def test_a_lower_case_mid_line_label_is_prose():
    with pytest.raises(ParseError, match="neither"):
        parse("Thought: my final answer: is not ready")


# Rule: the final answer runs up to an action, action-input, observation or final-answer label
# only.


def test_a_repeated_answer_label_ends_the_first_answer():
    assert answer("Final Answer: first\nFinal Answer: second").answer == "first"


def test_an_answer_holding_a_question_line_is_kept_whole():
    text = "Final Answer: Here is the FAQ.\nQuestion: Who?\nAnswer: Us.\nThought: see above"
    assert (
        answer(text).answer == "Here is the FAQ.\nQuestion: Who?\nAnswer: Us.\nThought: see above"
    )


@pytest.mark.parametrize("chunk_size", [1, 4, 100])
def test_the_streamed_answer_keeps_the_question_line_too(chunk_size):
    text = "Final Answer: Here is the FAQ.\nQuestion: Who?\nAnswer: Us."
    assert "".join(stream(text, chunk_size)) == answer(text).answer


# Rule: JSON nested deeper than jsontext.MAX_DEPTH is a parse error, never a RecursionError.

DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    "text",
    [
        '{"action": "echo", "action_input": ' + DEEP + "}",
        'Action: {"action": "echo", "action_input": ' + DEEP + "}",
        'Thought: x\n```json\n{"action": "echo", "action_input": ' + DEEP + "}\n```",
    ],
    ids=["bare", "after-action", "fenced"],
)
def test_deeply_nested_json_is_a_parse_error(text):
    with pytest.raises(ParseError, match="nested deeper than 100 levels"):
        parse(text)


def test_the_model_is_told_about_deep_json_and_the_run_goes_on(harness):
    reply = '{"action": "echo", "action_input": ' + DEEP + "}"
    steps = harness.run([reply, "Final Answer: sorry"], [Echo()])
    error = without_records(steps)[0]
    assert isinstance(error, ErrorStep)
    assert error.code == "parse_error"
    assert "nested deeper" in error.message
    assert final(steps).text == "sorry"


def test_a_deep_action_input_is_text_for_the_tool_not_a_crash():
    # Text that starts like a JSON object is tried as one; too deep, it stays text.
    text = '{"text": ' + DEEP + "}"
    assert Echo().coerce_input(text) == {"text": text}


def test_deep_native_arguments_are_an_error_step(harness):
    from agents.react.testing import tool_calls

    replies = [tool_calls(("echo", '{"text": ' + DEEP + "}")), "ok"]
    steps = harness.run(replies, [Echo()], mode="tools")
    errors = [s for s in steps if isinstance(s, ErrorStep)]
    assert [e.code for e in errors] == ["invalid_arguments"]
    assert "nested deeper" in errors[0].message


# Rule: an action that names no tool, or an action input with no action, followed by a final
# answer, is a leftover of the format: the final answer counts (as in LangChain).


@pytest.mark.parametrize(
    "text",
    [
        "Thought: I know it.\nAction: None\nFinal Answer: 42",
        "Thought: I know it.\nAction: N/A\nAction Input: None\nFinal Answer: 42",
        "Thought: I know it.\nAction Input: \nFinal Answer: 42",
        "Thought: No further Action: needed.\nFinal Answer: 42",
    ],
)
def test_leftovers_of_the_format_before_a_final_answer(text):
    assert answer(text).answer == "42"


@pytest.mark.parametrize("chunk_size", [1, 3])
def test_leftovers_stream_the_answer(chunk_size):
    text = "Thought: I know it.\nAction: None\nFinal Answer: 42 it is"
    assert "".join(stream(text, chunk_size)) == "42 it is"


def test_a_none_action_without_an_answer_is_still_an_action():
    # The executor then says there is no tool named "None": the model is told.
    assert action("Action: None\nAction Input: x").tool == "None"


# Rule: a closing fence left over from a fenced reply is not part of the answer or input.


def test_the_closing_fence_of_a_fenced_reply_is_not_in_the_answer():
    assert answer("```\nThought: done\nFinal Answer: 42\n```").answer == "42"
    assert answer("```text\nFinal Answer: line one\nline two\n```\n").answer == (
        "line one\nline two"
    )


def test_a_code_block_closing_inside_the_answer_stays():
    text = "Final Answer: run\n```\nls\n```"
    assert answer(text).answer == "run\n```\nls\n```"


def test_the_closing_fence_of_a_fenced_reply_is_not_in_the_input():
    assert action("```\nAction: echo\nAction Input: hello\n```").tool_input == "hello"


def test_the_fenced_reply_thought_has_no_fence():
    assert answer("```\nThought: done\nFinal Answer: 42\n```").thought == "done"


# Rule: a last line that is a cut stop sequence is not part of the action input.


@pytest.mark.parametrize("cut", ["O", "Obs", "Observ", "Observation", "observ", "观"])
def test_a_cut_stop_sequence_is_dropped_from_the_input(cut):
    assert action(f"Action: echo\nAction Input: hello\n{cut}").tool_input == "hello"


def test_a_one_line_input_that_looks_like_a_cut_is_kept():
    assert action("Action: echo\nAction Input: Obs").tool_input == "Obs"


# Rule: the parser and both filters are linear. Counted, not timed: the characters the
# label search looks at, over many small chunks that each hold ":" or a backtick.


class CountingPattern:
    def __init__(self, pattern) -> None:
        self.pattern = pattern
        self.looked_at = 0

    def search(self, text, start, end):
        self.looked_at += end - start
        return self.pattern.search(text, start, end)


@pytest.mark.parametrize("stream_class", [AnswerStream, ThoughtStream])
@pytest.mark.parametrize("chunk", [": ", "` ", "a:`b "])
def test_the_filters_look_at_each_character_a_bounded_number_of_times(
    monkeypatch, stream_class, chunk
):
    counting = CountingPattern(parser_module._CANDIDATES)
    monkeypatch.setattr(parser_module, "_CANDIDATES", counting)
    head = "Final Answer: " if stream_class is AnswerStream else "Thought: "
    stream = stream_class(lambda _: None)
    stream.feed(head)
    chunks = 10_000
    for _ in range(chunks):
        stream.feed(chunk)
    stream.finish()
    total = len(head) + chunks * len(chunk)
    assert counting.looked_at <= 2 * total
    if stream_class is AnswerStream:
        assert len(stream.sent) >= chunks * len(chunk.strip()) - 1
