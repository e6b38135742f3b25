"""The ReAct parser at the edges a model really reaches: an invented observation after an
ordinary word that looks like a label, a stop sequence cut in a multi-line input, a thought
beside a fenced JSON action, and JSON inputs that are not text."""

from __future__ import annotations

import pytest

from agents.react.errors import ParseError
from agents.react.parser import ParsedAction, cut_invented_observation, parse


def action(text: str) -> ParsedAction:
    parsed = parse(text)
    assert isinstance(parsed, ParsedAction), parsed
    return parsed


@pytest.mark.parametrize("word", ["action", "final answer", "observation", "thought"])
def test_an_invented_observation_after_a_lowercase_label_word_is_still_cut(word):
    """The model wrote its own observation, then answered from it: the answer is not taken."""
    reply = f"Thought: the {word} is clear. Observation: it is 42\nFinal Answer: 42"

    assert cut_invented_observation(reply) == (f"Thought: the {word} is clear.", True)
    with pytest.raises(ParseError) as refused:
        parse(reply)
    assert refused.value.text == f"Thought: the {word} is clear."


@pytest.mark.parametrize("cut", ["Observ", "Observation", "observation:", "**Obs"])
def test_a_cut_stop_sequence_after_a_multi_line_input_is_dropped(cut):
    reply = f"Thought: write it\nAction: write\nAction Input: line one\nline two\n{cut}"
    assert action(reply).tool_input == "line one\nline two"


def test_a_fence_left_open_after_a_multi_line_input_is_dropped():
    reply = "Thought: write it\nAction: write\nAction Input: line one\nline two\n```"
    assert action(reply).tool_input == "line one\nline two"


def test_a_multi_line_input_whose_last_line_only_starts_like_a_label_keeps_it():
    reply = "Thought: write it\nAction: write\nAction Input: first line\nObservatory"
    assert action(reply).tool_input == "first line\nObservatory"


def test_the_thought_before_a_fenced_json_action_is_kept():
    reply = (
        "I will look it up first.\n"
        '```json\n{"action": "search", "action_input": "cats"}\n```'
    )  # fmt: skip
    parsed = action(reply)
    assert (parsed.tool, parsed.tool_input, parsed.thought) == (
        "search",
        "cats",
        "I will look it up first.",
    )


@pytest.mark.parametrize("closing", ["\n```", "\n```\n", ""])
def test_the_thought_of_a_reply_wrapped_whole_in_a_fence_is_kept(closing):
    reply = f"```\nThought: I will look it up\nAction: search\nAction Input: cats{closing}"
    parsed = action(reply)
    assert (parsed.tool, parsed.tool_input, parsed.thought) == (
        "search",
        "cats",
        "I will look it up",
    )


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("[1, 2, 3]", "[1, 2, 3]"),
        ("42", "42"),
        ("2.5", "2.5"),
        ("true", "true"),
        ('["é", "北京"]', '["é", "北京"]'),
    ],
)
@pytest.mark.parametrize(
    "form",
    [
        'Thought: add\n{{"action": "sum", "action_input": {}}}',
        'Thought: add\nAction: {{"action": "sum", "action_input": {}}}',
        'Thought: add\n```json\n{{"action": "sum", "action_input": {}}}\n```',
    ],
    ids=["bare", "after-action", "fenced"],
)
def test_a_json_action_whose_input_is_not_text_keeps_that_input(form, written, kept):
    parsed = action(form.format(written))
    assert (parsed.tool, parsed.tool_input, parsed.thought) == ("sum", kept, "add")
