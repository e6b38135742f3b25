"""The ReAct parser: the format variants it accepts, what it refuses, and its policies."""

from __future__ import annotations

import pytest

from agents.react.errors import ParseError
from agents.react.parser import (
    AnswerStream,
    ParsedAction,
    ParsedFinalAnswer,
    cut_invented_observation,
    find_markers,
    parse,
)


def action(text: str) -> ParsedAction:
    parsed = parse(text)
    assert isinstance(parsed, ParsedAction), parsed
    return parsed


def parse_or_error(text: str) -> ParsedAction | ParsedFinalAnswer | ParseError:
    try:
        return parse(text)
    except ParseError as error:
        return error


def answer(text: str) -> ParsedFinalAnswer:
    parsed = parse(text)
    assert isinstance(parsed, ParsedFinalAnswer), parsed
    return parsed


@pytest.mark.parametrize(
    ("text", "tool", "tool_input"),
    [
        # What LangChain's MRKL / ReAct single-input parsers accept.
        ("Thought: add\nAction: adder\nAction Input: 2 3", "adder", "2 3"),
        (" I must add\nAction: adder\nAction Input: 2 3", "adder", "2 3"),
        ("Action 1: adder\nAction 1 Input 1: 2 3", "adder", "2 3"),
        ('Action: adder\nAction Input: "2 3"', "adder", "2 3"),
        ("Thought: x Action: adder Action Input: 2 3", "adder", "2 3"),
        ("Action:adder\nAction Input:2 3", "adder", "2 3"),
        # More than that.
        ("thought: add\naction: adder\naction input: 2 3", "adder", "2 3"),
        ("THOUGHT: add\nACTION:   adder  \nACTION INPUT:    2 3   ", "adder", "2 3"),
        ("Action_Input comes later\nAction: adder\nAction_Input: 2 3", "adder", "2 3"),
        ("Action : adder\nAction Input : 2 3", "adder", "2 3"),
        ("**Thought:** add\n**Action:** adder\n**Action Input:** 2 3", "adder", "2 3"),
        ("Action: `adder`\nAction Input: '2 3'", "adder", "2 3"),
        ('Action: "adder".\nAction Input: `2 3`', "adder", "2 3"),
        ("Action: adder\nAction Input: “2 3”", "adder", "2 3"),
        ("Action: echo\nAction Input: 3*4 is **bold**", "echo", "3*4 is **bold**"),
        ('Action: echo\nAction Input: "a" and "b"', "echo", '"a" and "b"'),
        ("Action: echo\nAction Input: *.py", "echo", "*.py"),
        ("Action: adder()\nAction Input: 2 3", "adder", "2 3"),
        ("Action: search[weather in Paris]", "search", "weather in Paris"),
    ],
)
def test_action_variants(text, tool, tool_input):
    parsed = action(text)
    assert (parsed.tool, parsed.tool_input) == (tool, tool_input)


def test_thought_is_the_text_before_the_action():
    parsed = action("I need the sum.\nThought: really\nAction: adder\nAction Input: 1 2")
    assert parsed.thought == "I need the sum.\nreally"


def test_multi_line_input_runs_to_the_next_label():
    parsed = action(
        "Thought: write code\nAction: python\nAction Input: x = 1\ny = 2\nprint(x + y)\n"
        "Thought: that was it"
    )
    assert parsed.tool_input == "x = 1\ny = 2\nprint(x + y)"


def test_input_in_a_code_fence_keeps_label_like_lines():
    parsed = action(
        "Action: python\nAction Input:\n```python\nprint('Action: no')\nObservation = 3\n```\n"
    )
    assert parsed.tool_input == "print('Action: no')\nObservation = 3"


def test_input_fenced_on_one_line():
    assert action("Action: echo\nAction Input: ```hello```").tool_input == "hello"


@pytest.mark.parametrize(
    "text",
    [
        'Thought: add\nAction:\n```json\n{"action": "adder", "action_input": {"a": 1, "b": 2}}```',
        'Thought: add\nAction:\n```\n{"action": "adder", "action_input": {"a": 1, "b": 2}}\n```',
        'Action: {"action": "adder", "action_input": {"a": 1, "b": 2}}',
        '{"action": "adder", "action_input": {"a": 1, "b": 2}}',
        'Thought: add\n```json\n{"tool": "adder", "tool_input": {"a": 1, "b": 2}}\n```',
        '{"name": "adder", "arguments": {"a": 1, "b": 2}}',
    ],
)
def test_json_action_blob(text):
    parsed = action(text)
    assert (parsed.tool, parsed.tool_input) == ("adder", {"a": 1, "b": 2})


def test_json_blob_thought_is_the_text_before_it():
    parsed = action('Thought: add them\n{"action": "echo", "action_input": "hi"}')
    assert (parsed.thought, parsed.tool_input) == ("add them", "hi")


def test_json_blob_final_answer():
    parsed = answer('```json\n{"action": "Final Answer", "action_input": "Paris"}\n```')
    assert parsed.answer == "Paris"


def test_json_blob_without_input_is_a_parse_error():
    with pytest.raises(ParseError, match="action_input"):
        parse('{"action": "adder"}')


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Thought: done\nFinal Answer: 42", "42"),
        ("Final Answer:42", "42"),
        ("final answer: 42", "42"),
        ("**Final Answer:** 42", "42"),
        ("Final Answer: **42** is bold", "**42** is bold"),
        ("Thought: x Final Answer: 42", "42"),
        (
            "Final Answer: line one\nline two\n\n- a list\n- b",
            "line one\nline two\n\n- a list\n- b",
        ),
        ("Final Answer: my observation: it works", "my observation: it works"),
        ("Final Answer:\n```\nThought: quoted\n```", "```\nThought: quoted\n```"),
        ("Action: Finish[Paris]", "Paris"),
    ],
)
def test_final_answer_variants(text, expected):
    assert answer(text).answer == expected


def test_final_answer_keeps_later_label_like_lines():
    # Rule: the final answer runs up to an action, action-input or observation label only.
    assert answer("Final Answer: 42\nThought: I am done").answer == "42\nThought: I am done"
    faq = "Final Answer: Two entries.\nQuestion: What is it?\nIt is a FAQ."
    assert answer(faq).answer == "Two entries.\nQuestion: What is it?\nIt is a FAQ."


def test_chinese_labels_with_full_width_colons():
    parsed = action('思考：我需要计算\n行动：adder\n行动输入：{"a": 1, "b": 2}')
    assert (parsed.thought, parsed.tool, parsed.tool_input) == (
        "我需要计算",
        "adder",
        '{"a": 1, "b": 2}',
    )
    assert answer("思考：知道了\n最终答案：三").answer == "三"
    assert answer("最终答案: 三").answer == "三"


def test_english_labels_are_read_in_a_chinese_run_and_back():
    assert action("思考：要算\nAction: adder\n行动输入：1").tool == "adder"


# -- the policy when both are present -----------------------------------------------------


def test_action_first_wins_over_a_later_final_answer():
    parsed = action("Action: adder\nAction Input: 1 2\nFinal Answer: 3")
    assert (parsed.tool, parsed.tool_input) == ("adder", "1 2")


def test_final_answer_first_wins_over_a_later_action():
    assert answer("Final Answer: 3\nAction: adder\nAction Input: 1 2").answer == "3"


def test_only_the_first_of_two_actions_is_taken():
    parsed = action("Action: a\nAction Input: 1\nAction: b\nAction Input: 2")
    assert (parsed.tool, parsed.tool_input) == ("a", "1")


# -- invented observations ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Action: adder\nAction Input: 1 2\nObservation: 3\nThought: done\nFinal Answer: 3",
        "Action: adder\nAction Input: 1 2 Observation: 3\nFinal Answer: 3",
        "Action: adder\nAction Input: 1 2\nobservation : 3\nFinal Answer: 3",
        "Action: adder\nAction Input: 1 2\n观察：3\n最终答案：3",
    ],
)
def test_text_is_cut_at_the_first_invented_observation(text):
    parsed = action(text)
    assert (parsed.tool, parsed.tool_input) == ("adder", "1 2")
    assert "3" not in parsed.text.split("1 2", 1)[1]


def test_an_answer_after_an_invented_observation_is_never_trusted():
    with pytest.raises(ParseError):
        parse("Observation: the tool said 42\nFinal Answer: 42")


def test_cut_reports_whether_it_cut():
    assert cut_invented_observation("Thought: a\nObservation: b") == ("Thought: a", True)
    assert cut_invented_observation("Final Answer: an observation: fine") == (
        "Final Answer: an observation: fine",
        False,
    )


# -- parse errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Action: adder", "no action input"),
        ("Thought: hmm\nAction: adder\nThought: more", "no action input"),
        ("The answer is 42.", "neither an action nor a final answer"),
        ("Thought: I know it, it is 42.", "neither an action nor a final answer"),
        ("", "neither an action nor a final answer"),
        ("Action Input: 1 2", "no action before it"),
        ("Action:\nAction Input: 1", "names no tool"),
        ("Final Answer:   \n", "final answer is empty"),
    ],
)
def test_parse_errors(text, problem):
    with pytest.raises(ParseError, match=problem) as caught:
        parse(text)
    assert caught.value.code == "parse_error"
    assert caught.value.text == text


# -- linear time on adversarial text --------------------------------------------------------


NEITHER = "the reply has neither an action nor a final answer"


def _plain(text: str) -> str:
    """A test id of ASCII letters, digits and ``_``: pytest escapes other characters in ids,
    and an escaped id given back on the command line (as ``make mutation`` does) is not
    found."""
    return "".join(
        char if char.isascii() and char.isalnum() else f"_{ord(char):x}" for char in text
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Action: " + " \t" * 100_000, "the action names no tool"),
        ("Action" + " \t" * 100_000, NEITHER),
        ("Action " * 50_000, NEITHER),
        ("Action 1" * 50_000, NEITHER),
        ("Thought:" * 50_000, NEITHER),
        ("Final" + " " * 100_000 + "Answer", NEITHER),
        ("{" * 100_000, "nested deeper than 100 levels"),
        ('{"action": "' + "a" * 100_000, NEITHER),
        ("```\n" * 50_000, NEITHER),
        ("\n" * 100_000 + "Action", NEITHER),
        ("行动" * 50_000, NEITHER),
        ("Action:" + "\u3000" * 100_000, "the action names no tool"),
    ],
    ids=lambda value: f"{_plain(value[:12])}x{len(value)}",
)
def test_adversarial_text_is_refused_in_linear_time(text, problem):
    with pytest.raises(ParseError, match=problem):
        parse(text)


def test_adversarial_whitespace_input_is_an_empty_input():
    parsed = action("Action: echo\nAction Input:" + " \t" * 100_000)
    assert (parsed.tool, parsed.tool_input) == ("echo", "")


def test_adversarial_final_answer_is_kept_whole():
    padding = " \t" * 100_000
    assert answer("Final Answer: yes" + padding + "done").answer == "yes" + padding + "done"


def test_markers_are_found_in_order():
    roles = [m.role for m in find_markers("Thought: a\nAction: b\nAction Input: c")]
    assert roles == ["thought", "action", "action_input"]


# -- streaming the answer -----------------------------------------------------------------


def stream(text: str, chunk_size: int) -> list[str]:
    deltas: list[str] = []
    answer_stream = AnswerStream(deltas.append)
    for start in range(0, len(text), chunk_size):
        answer_stream.feed(text[start : start + chunk_size])
    answer_stream.finish()
    return deltas


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5, 8, 1000])
def test_stream_passes_only_the_answer(chunk_size):
    text = "Thought: the secret plan\nFinal Answer: It is\n114, as computed.\nAction: bye"
    deltas = stream(text, chunk_size)
    assert "".join(deltas) == "It is\n114, as computed."
    assert "".join(deltas) == answer(text).answer
    assert not any("secret" in delta for delta in deltas)


def test_stream_passes_the_answer_as_it_arrives():
    deltas: list[str] = []
    answer_stream = AnswerStream(deltas.append)
    answer_stream.feed("Thought: hm\nFinal Ans")
    assert deltas == []
    answer_stream.feed("wer: The first")
    assert deltas == ["The first"]
    answer_stream.feed(" part")
    assert deltas == ["The first", " part"]


def test_stream_holds_back_a_line_that_may_become_a_label():
    deltas: list[str] = []
    answer_stream = AnswerStream(deltas.append)
    answer_stream.feed("Final Answer: one\nActi")
    assert "".join(deltas) == "one"
    answer_stream.feed("on: adder\nAction Input: 1")
    answer_stream.finish()
    assert "".join(deltas) == "one"


def test_stream_sends_nothing_when_an_action_comes_first():
    assert stream("Action: adder\nAction Input: 1\nFinal Answer: 3", 2) == []


def test_stream_chinese_answer():
    text = "思考：算好了\n最终答案：答案是一百一十四。"
    assert "".join(stream(text, 1)) == "答案是一百一十四。"


def test_stream_bold_label():
    assert "".join(stream("**Final Answer:** **42** it is", 1)) == "**42** it is"


STREAM_CORPUS = [
    "Thought: plan\nFinal Answer: 42",
    "Final Answer: 42\n**Thought:** done",
    "Final Answer: the sum is 5 Observation: invented",
    "Final Answer: line\n\n  - item: one\n  - item: two\n",
    "Final Answer:   \n\n  padded answer   \n\n",
    "**Final Answer:** **bold** start",
    "Final Answer: ```\nAction: inside a fence\n```\nafter",
    "Final Answer: 3\nAction: adder\nAction Input: 1",
    "Action: adder\nAction Input: 1\nFinal Answer: 3",
    "思考：好\n最终答案：答案\n第二行\n观察：编的",
    "Final Answer: Thoughtful answers: are fine",
    "Final Answer: an answer ending in a label-like word Action",
    "Thought: no answer here",
    "Final Answer:",
]


@pytest.mark.parametrize("text", STREAM_CORPUS)
@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 64])
def test_streamed_text_always_equals_the_parsed_answer(text, chunk_size):
    parsed = parse_or_error(text)
    expected = parsed.answer if isinstance(parsed, ParsedFinalAnswer) else ""
    assert "".join(stream(text, chunk_size)) == expected


def test_decoration_of_the_next_label_is_not_part_of_the_answer():
    assert answer("Final Answer: 42\n**Action:** search").answer == "42"
