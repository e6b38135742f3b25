"""The ReAct parser at the edges a model really reaches: an invented observation after an
ordinary word that looks like a label, a stop sequence cut in a multi-line input, a thought
beside a fenced JSON action, and JSON inputs that are not text."""

from __future__ import annotations

import pytest

from agents.react.errors import ParseError
from agents.react.parser import (
    LabelScanner,
    ParsedAction,
    ParsedFinalAnswer,
    cut_invented_observation,
    parse,
)


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


# -- labels a model writes without the usual spacing ------------------------------------------


def test_numbered_labels_with_no_space_after_the_colon_keep_the_first_character():
    parsed = action("Thought: add\nAction 1:calculator\nAction Input 1:2+2")
    assert (parsed.tool, parsed.tool_input) == ("calculator", "2+2")


def test_numbered_labels_with_a_full_width_colon_are_read():
    parsed = action("Thought: add\nAction 1：calculator\nAction Input 1：2+2")
    assert (parsed.tool, parsed.tool_input) == ("calculator", "2+2")


def test_a_finished_scanner_takes_no_more_text():
    scanner = LabelScanner()
    scanner.feed("Thought: done")
    scanner.finish()
    scanner.feed("\nAction: calculator")
    assert scanner.text == "Thought: done"
    assert [marker.role for marker in scanner.markers] == ["thought"]


def test_a_whole_step_on_the_line_of_its_action_label_is_read():
    parsed = action("Thought: add them\nAction: calculator Action Input: 2+2")
    assert (parsed.tool, parsed.tool_input, parsed.thought) == ("calculator", "2+2", "add them")


def test_a_line_under_the_action_is_not_part_of_the_tool_name():
    parsed = action("Thought: add\nAction: calculator\nI will add them.\nAction Input: 2+2")
    assert (parsed.tool, parsed.tool_input) == ("calculator", "2+2")


def test_a_leftover_empty_action_on_one_line_gives_way_to_the_final_answer():
    parsed = parse("Thought: done\nAction: None Action Input: none\nFinal Answer: 42")
    assert isinstance(parsed, ParsedFinalAnswer)
    assert parsed.answer == "42"


# -- fences and quoted code -------------------------------------------------------------------


def test_a_reply_wrapped_whole_in_an_indented_fence_is_read_without_its_fences():
    reply = "  ```\n  Thought: I will look it up\n  Action: search\n  Action Input: cats\n  ```"
    parsed = action(reply)
    assert (parsed.tool, parsed.tool_input, parsed.thought) == (
        "search",
        "cats",
        "I will look it up",
    )


def test_code_quoted_in_a_thought_keeps_its_fences():
    reply = (
        "Thought: I will run this:\n```python\nx = 6\nprint(x * 7)\n```\n"
        "Action: python\nAction Input: print(42)"
    )
    parsed = action(reply)
    assert parsed.thought == "I will run this:\n```python\nx = 6\nprint(x * 7)\n```"
    assert (parsed.tool, parsed.tool_input) == ("python", "print(42)")


def test_a_label_on_the_opening_line_of_a_fence_is_code():
    reply = "Thought: like this:\n```Action: python Action Input: 1\n```\nFinal Answer: shown"
    parsed = parse(reply)
    assert isinstance(parsed, ParsedFinalAnswer)
    assert parsed.answer == "shown"


def test_a_fenced_json_that_is_data_is_passed_over_for_the_action_after_it():
    reply = (
        'The data:\n```json\n{"a": 1}\n```\n'
        '{"action": "calculator", "action_input": "2+2"}'
    )  # fmt: skip
    parsed = action(reply)
    assert (parsed.tool, parsed.tool_input) == ("calculator", "2+2")


def test_a_json_action_nested_too_deep_on_its_own_line_is_refused_with_the_reply():
    reply = "Thought: deep\n" + '{"action": "a", "action_input": ' + "[" * 200 + "]" * 200 + "}"
    with pytest.raises(ParseError, match="nested deeper") as refused:
        parse(reply)
    assert refused.value.text == reply


# -- inputs -----------------------------------------------------------------------------------


def test_an_input_whose_last_line_is_a_board_row_keeps_it():
    """A row of X and O ends with an O, as an observation label begins: still the input."""
    reply = "Thought: my move\nAction: play\nAction Input: OX.\nXXO"
    assert action(reply).tool_input == "OX.\nXXO"


def test_an_action_with_an_unclosed_bracket_is_an_error_not_a_cut_input():
    with pytest.raises(ParseError, match="has no action input"):
        parse("Thought: add\nAction: calculator[2+2")


def test_a_bracket_action_keeps_the_reply_for_the_scratchpad():
    """The transcript replays ``text`` to the model as what it wrote."""
    reply = "Thought: add\nAction: calculator[2+2]"
    parsed = action(reply)
    assert (parsed.tool, parsed.tool_input, parsed.text) == ("calculator", "2+2", reply)


@pytest.mark.parametrize(
    "reply",
    [
        ' {"action": "calculator", "action_input": "2+2"}',
        'Thought: add\n  {"action": "calculator", "action_input": "2+2"}',
        'Thought: add\n- {"action": "calculator", "action_input": "2+2"}',
    ],
    ids=["leading-space", "indented", "bulleted"],
)
def test_a_json_action_after_spaces_or_a_bullet_on_its_line_is_read(reply):
    parsed = action(reply)
    assert (parsed.tool, parsed.tool_input) == ("calculator", "2+2")


def test_a_json_action_after_its_label_keeps_the_reply_for_the_scratchpad():
    reply = 'Thought: add\nAction: {"action": "calculator", "action_input": "2+2"}'
    parsed = action(reply)
    assert (parsed.tool, parsed.tool_input, parsed.text) == ("calculator", "2+2", reply)


def test_a_bracket_input_holding_brackets_keeps_them():
    parsed = action("Thought: index it\nAction: python[x[0]]")
    assert (parsed.tool, parsed.tool_input) == ("python", "x[0]")


def test_an_empty_final_answer_is_refused_with_words_the_model_is_shown():
    with pytest.raises(ParseError, match=r"^the final answer is empty$"):
        parse("Thought: done\nFinal Answer:   \n")


def test_a_one_line_step_takes_the_action_label_closest_to_its_input():
    """A thought that mentions the word before the real label is still thought."""
    parsed = action("Thought: the next Action: is clear Action: search Action Input: cats")
    assert (parsed.tool, parsed.tool_input) == ("search", "cats")
    assert parsed.thought == "the next Action: is clear"


@pytest.mark.parametrize(
    "reply",
    [
        'A {"action": "calculator", "action_input": "2+2"} is what I would send.',
        'Hm.\nA {"action": "calculator", "action_input": "2+2"} is what I would send.',
        'I could send {"action": "calculator", "action_input": "2+2"} but will not.',
    ],
    ids=["at-the-start", "after-a-line", "mid-sentence"],
)
def test_a_json_action_quoted_inside_a_sentence_is_not_a_call(reply):
    """Only an object that starts its line (after spaces or a bullet) is an action."""
    with pytest.raises(ParseError, match="neither an action nor a final answer"):
        parse(reply)


@pytest.mark.parametrize(
    ("written", "tool", "tool_input"),
    [
        ("`search`[cats]", "search", "cats"),
        ("**search**[cats]", "search", "cats"),
        ("LaTeX[x^2]", "LaTeX", "x^2"),  # letters at the name's ends are its own
    ],
)
def test_a_bracket_action_names_its_tool_without_the_marks_around_it(written, tool, tool_input):
    parsed = action(f"Thought: look\nAction: {written}")
    assert (parsed.tool, parsed.tool_input) == (tool, tool_input)


@pytest.mark.parametrize(
    "written",
    ["look it up [later]", "search[first\nsecond]"],
    ids=["words-before-the-bracket", "spread-over-lines"],
)
def test_an_action_that_only_looks_like_a_bracket_call_asks_for_its_input(written):
    with pytest.raises(ParseError, match="has no action input"):
        parse(f"Thought: look\nAction: {written}")


# -- inputs, refusals and labels at their edges -------------------------------------------


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ('""', ""),  # an empty quoted input is empty, not two quotes
        ("「東京」", "東京"),  # corner brackets quote as quotation marks do
        ("```XYZ corp```", "XYZ corp"),  # letters at the ends of a one-line fence are kept
        ("X ** 2", "X ** 2"),  # a power is not a bold label's closing stars
        ("** cats", "cats"),  # the closing stars of "**Action Input: **"
    ],
)
def test_an_input_loses_only_its_quotes_fences_and_label_marks(written, kept):
    assert action(f"Thought: go\nAction: python\nAction Input: {written}").tool_input == kept


def test_a_cut_stop_sequence_on_its_own_line_before_a_newline_is_dropped():
    reply = "Thought: write it\nAction: write\nAction Input: line one\nline two\nObserv\n"
    assert action(reply).tool_input == "line one\nline two"


def test_a_tool_whose_name_begins_or_ends_with_x_keeps_its_name():
    assert action("Thought: typeset\nAction: LaTeX\nAction Input: x^2").tool == "LaTeX"


def test_an_empty_bold_final_answer_is_refused_with_words_the_model_is_shown():
    with pytest.raises(ParseError, match=r"^the final answer is empty$"):
        parse("Thought: done\n**Final Answer:**")


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        # A fence in the middle of a line is not a fence line: the last line still closes
        # the fence the whole reply was wrapped in.
        ("type ``` to open a block\n```", "type ``` to open a block"),
        # A code block inside the answer, then the wrapping fence's end: only that goes.
        ("run\n```sh\nls\n```\n```", "run\n```sh\nls\n```"),
    ],
)
def test_a_reply_wrapped_in_a_fence_loses_only_the_wrapping_fence_from_its_answer(answer, kept):
    parsed = parse(f"```\nThought: x\nFinal Answer: {answer}")
    assert isinstance(parsed, ParsedFinalAnswer)
    assert parsed.answer == kept


def test_text_before_a_reply_wrapped_in_a_fence_is_thought_without_the_fence():
    parsed = action("Sure:\n```\nThought: x\nAction: search\nAction Input: cats\n```")
    assert (parsed.thought, parsed.tool, parsed.tool_input) == ("Sure:\nx", "search", "cats")


def test_a_json_action_after_its_label_nested_too_deep_is_refused_with_the_reply():
    reply = "Thought: deep\nAction: " + '{"action": "a", "action_input": ' + "[" * 200
    reply += "]" * 200 + "}"
    with pytest.raises(ParseError, match="nested deeper") as refused:
        parse(reply)
    assert refused.value.text == reply


def test_a_json_final_answer_keeps_the_reply_for_the_scratchpad():
    reply = 'Thought: done\n{"action": "Final Answer", "action_input": "42"}'
    parsed = parse(reply)
    assert isinstance(parsed, ParsedFinalAnswer)
    assert (parsed.answer, parsed.text) == ("42", reply)


def test_two_steps_on_one_line_take_the_first_with_its_own_input():
    step = "Action: search Action Input: {}"
    parsed = action(f"Thought: t {step.format('cats')} {step.format('dogs')}")
    assert (parsed.tool, parsed.tool_input) == ("search", "cats")


def test_an_action_whose_value_is_the_next_label_names_no_tool():
    with pytest.raises(ParseError, match="names no tool"):
        parse("Thought: t\nAction: Action Input: cats")


SEARCH_CATS = '{"action": "search", "action_input": "cats"}'


@pytest.mark.parametrize(
    "reply",
    [
        f"Thought: I will   look it up\n```json\n{SEARCH_CATS}\n```",  # spaces inside lines
        f"Thought: I will   look it up\n```json\n{SEARCH_CATS}",  # the fence left open
    ],
    ids=["closed", "left-open"],
)
def test_the_thought_before_a_fenced_json_action_leaves_the_fence_out(reply):
    parsed = action(reply)
    assert (parsed.tool, parsed.thought) == ("search", "I will   look it up")


def test_a_fenced_json_action_nested_too_deep_is_refused_with_the_reply():
    deep = '{"action": "a", "action_input": ' + "[" * 200 + "]" * 200 + "}"
    reply = f"Thought: deep\n```json\n{deep}\n```"
    with pytest.raises(ParseError, match="nested deeper") as refused:
        parse(reply)
    assert refused.value.text == reply


def test_a_json_action_after_a_braced_mention_and_with_a_nested_input_is_read():
    reply = 'I think {x} is wrong.\n{"action": "search", "action_input": {"q": "cats"}}'
    assert action(reply).tool_input == {"q": "cats"}


@pytest.mark.parametrize(("data_lines", "found"), [(19, True), (20, False)])
def test_a_json_action_is_looked_for_among_the_first_twenty_objects_only(data_lines, found):
    """A reply of many objects that are data is not searched without end."""
    reply = '{"row": 1}\n' * data_lines + SEARCH_CATS
    if found:
        assert action(reply).tool == "search"
    else:
        with pytest.raises(ParseError, match="neither an action nor a final answer"):
            parse(reply)


@pytest.mark.parametrize(
    "reply",
    ["Thought: done\nFinal Answer: 42", "Thought: done\nAction: finish[42]"],
    ids=["label", "bracket"],
)
def test_a_final_answer_keeps_the_reply_for_the_scratchpad(reply):
    parsed = parse(reply)
    assert isinstance(parsed, ParsedFinalAnswer)
    assert (parsed.answer, parsed.text) == ("42", reply)


@pytest.mark.parametrize(
    ("reply", "told"),
    [
        ("Thought: t\nAction Input: cats", "an action input with no action before it"),
        ("Thought: t\nAction: **\nAction Input: cats", "the action names no tool"),
        ("Thought: t\nAction:Action Input: cats", "the action names no tool"),
        ("Thought: nothing to do", "the reply has neither an action nor a final answer"),
        # A mention of the label mid-line, with no action on its line, is thought, on the
        # reply's first line too.
        ("I wonder what Action Input: means", "the reply has neither an action nor a final answer"),
        (
            "Thought: a question\nwhat does Action Input: mean",
            "the reply has neither an action nor a final answer",
        ),
    ],
)
def test_a_reply_that_cannot_be_used_is_refused_with_exactly_the_words_the_model_is_shown(
    reply, told
):
    with pytest.raises(ParseError) as refused:
        parse(reply)
    assert str(refused.value) == told


def test_a_label_after_a_word_that_holds_a_label_word_is_still_read():
    """ "reaction" holds "action": passed over, and the line's real label after it is read."""
    parsed = parse("Thought: a reaction. Final Answer: 42")
    assert isinstance(parsed, ParsedFinalAnswer)
    assert parsed.answer == "42"


def test_an_action_fenced_after_a_thought_outside_the_fence_is_read():
    parsed = action("Thought: x\n```\nAction: search\nAction Input: cats\n```")
    assert (parsed.thought, parsed.tool, parsed.tool_input) == ("x", "search", "cats")


@pytest.mark.parametrize(("number", "read"), [("1234", True), ("12345", False)])
def test_numbered_labels_are_read_up_to_four_digits(number, read):
    reply = f"Thought {number}: t\nAction {number}: search\nAction Input {number}: cats"
    if read:
        assert (action(reply).tool, action(reply).tool_input) == ("search", "cats")
    else:
        with pytest.raises(ParseError):
            parse(reply)


def test_an_input_line_that_starts_like_a_label_word_but_is_none_is_kept():
    reply = "Thought: log it\nAction: note\nAction Input: the score\nFinal: 3-1"
    assert action(reply).tool_input == "the score\nFinal: 3-1"


@pytest.mark.parametrize("text", ["xFinal Answer: 42", "1Final Answer: 42"])
def test_a_label_glued_to_the_replys_first_character_is_no_label(text):
    """A label is a word of its own from the reply's first character on, as it is anywhere
    else: "xFinal Answer" is one word, so the reply has no answer."""
    with pytest.raises(ParseError, match="neither an action nor a final answer"):
        parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "Action: None\nAction: calculator\nAction Input: 1",
        "Thought: t\nAction: None\nThought: oh\nAction: calculator\nAction Input: 2",
    ],
)
def test_an_action_naming_no_tool_is_passed_over_only_for_a_final_answer(text):
    """Only a final answer after it passes over an ``Action: None`` (a common way to
    answer); before another action it is the first action and decides: the model is told
    and asked again rather than having its later action guessed at."""
    with pytest.raises(ParseError, match="the action 'None' has no action input"):
        parse(text)


@pytest.mark.parametrize("written", ['""quoted"', '"quoted""', '"say "hi" twice"'])
def test_an_input_whose_quotes_do_not_pair_up_is_passed_as_written(written):
    """One pair of quotes around a whole input is taken off; with the quote inside it as
    well (next to either end, or anywhere), which pair was meant is unknown: left as is."""
    assert parse(f"Action: echo\nAction Input: {written}").tool_input == written
