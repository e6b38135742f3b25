"""What the executor passes on while a reply streams: thought deltas, answer deltas, resets.

The stored steps are the record; these tests check that the live text agrees with them (the
concatenated deltas of a call equal its stored thought, the answer deltas equal the stored
answer) and that every delta comes before the steps of its call.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.react.errors import ParseError, RunCancelled
from agents.react.executor import AgentConfig, AgentExecutor
from agents.react.parser import (
    AnswerStream,
    NativeAnswerStream,
    ParsedFinalAnswer,
    ThoughtStream,
    native_answer,
    parse,
)
from agents.react.prompt import PromptConfig
from agents.react.testing import ScriptedChatModel, tool_calls
from agents.react.types import (
    ErrorStep,
    FinalAnswerStep,
    ModelCallRecord,
    ThoughtDelta,
    ThoughtStep,
)
from tests.react.conftest import Harness, drain, final
from tests.react.tools import Adder, Echo

ADD = 'Thought: I should add\nthe two numbers.\nAction: adder\nAction Input: {"a": 2, "b": 3}'
ANSWER = "Thought: The tool said 5.\nFinal Answer: It is 5.\nSee above."


def feed(stream, text: str, chunk_size: int):
    for start in range(0, len(text), chunk_size):
        stream.feed(text[start : start + chunk_size])
    stream.finish()
    return stream


def thought_steps(steps) -> list[ThoughtStep]:
    return [step for step in steps if isinstance(step, ThoughtStep)]


# -- ReAct mode ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 1000])
def test_react_thoughts_stream_and_equal_the_stored_thoughts(harness, chunk_size):
    steps = harness.run([ADD, ANSWER], [Adder()], live=True, chunk_size=chunk_size)
    first, second = thought_steps(steps)
    assert harness.thought_text(0) == first.text == "I should add\nthe two numbers."
    assert harness.thought_text(1) == second.text == "The tool said 5."
    assert "".join(harness.deltas) == final(steps).text == "It is 5.\nSee above."
    for index in (0, 1):
        deltas = [d for d in harness.thoughts if d.call_index == index]
        assert deltas[0].offset == 0
        assert [d.done for d in deltas] == [False] * (len(deltas) - 1) + [True]


def test_a_thought_is_passed_on_while_the_model_is_still_writing(harness):
    seen_while_streaming: list[str] = []

    def reply(call):
        return ADD

    executor = harness.executor([reply, "Final Answer: 5"], [Adder()], live=True, chunk_size=2)
    # The scripted model hands chunks to on_text one by one: look at the deltas in between.
    original = executor.model.complete

    def complete(messages, **options):
        on_text = options["on_text"]

        def watching(text):
            on_text(text)
            seen_while_streaming.append("".join(d.text for d in harness.thoughts))

        return original(messages, **{**options, "on_text": watching})

    executor.model.complete = complete
    list(executor.run("q"))
    # After "Thought: I should ad" arrived, part of the thought was already out.
    assert any(0 < len(seen) < len("I should add") for seen in seen_while_streaming)


def test_thought_deltas_never_hold_action_lines_observations_or_answers(harness):
    replies = [
        'Thought: check\nAction: adder\nAction Input: {"a": 1, "b": 1}\nObservation: 99',
        "Thought: done now\nFinal Answer: The secret answer",
    ]
    harness.run(replies, [Adder()], live=True, chunk_size=1)
    streamed = "".join(delta.text for delta in harness.thoughts)
    for word in ("Action", "adder", "Observation", "99", "secret"):
        assert word not in streamed


def test_every_delta_of_a_call_comes_before_its_steps(harness):
    harness.run([ADD, ANSWER], [Adder()], live=True, chunk_size=3)
    log = harness.log
    for index in (0, 1):
        done_at = next(
            i
            for i, (kind, item) in enumerate(log)
            if kind == "thought" and item.call_index == index and item.done
        )
        record_at = next(
            i
            for i, (kind, item) in enumerate(log)
            if kind == "step" and isinstance(item, ModelCallRecord) and item.index == index
        )
        # The record of the call comes first, then "done", then the call's other steps.
        assert record_at < done_at
        assert log[done_at + 1][0] in ("step", "answer")
        assert all(kind != "step" for kind, _ in log[record_at + 1 : done_at])


def test_a_parse_error_ends_the_streamed_thought_with_done_and_no_step(harness):
    steps = harness.run(["Thought: I am confused", "Final Answer: ok"], live=True)
    assert isinstance(steps[1], ErrorStep)
    deltas = [d for d in harness.thoughts if d.call_index == 0]
    assert "".join(d.text for d in deltas) == "I am confused"
    assert deltas[-1].done
    assert not thought_steps(steps[:3])


def test_a_cancelled_call_sends_no_done(harness):
    calls = {"n": 0}

    def cancel_after_some_text() -> bool:
        calls["n"] += 1
        return len(harness.thoughts) > 0

    executor = AgentExecutor(
        model=ScriptedChatModel([ADD], chunk_size=1),
        tools=[Adder()],
        prompt=PromptConfig(),
        should_cancel=cancel_after_some_text,
        on_thought_delta=harness._thought_delta,
    )
    import agents.react.executor as executor_module

    steps: list = []
    original = executor_module.CANCEL_POLL_SECONDS
    executor_module.CANCEL_POLL_SECONDS = 0.0
    try:
        with pytest.raises(RunCancelled):
            drain(executor.run("q"), steps)
    finally:
        executor_module.CANCEL_POLL_SECONDS = original
    assert harness.thoughts
    assert not any(delta.done for delta in harness.thoughts)


def test_a_json_action_blob_is_never_streamed_as_thought(harness):
    blob = 'Thought: add them\n{"action": "adder", "action_input": {"a": 1, "b": 2}}'
    steps = harness.run([blob, "Final Answer: 3"], [Adder()], live=True, chunk_size=2)
    assert harness.thought_text(0) == thought_steps(steps)[0].text == "add them"
    assert not any("{" in delta.text for delta in harness.thoughts)


def test_a_mid_line_answer_mention_is_held_until_the_action_shows_it_was_thought(harness):
    reply = (
        "Thought: I will look it up, then give my Final Answer: once I know.\n"
        "Action: echo\nAction Input: weather"
    )
    steps = harness.run([reply, "Final Answer: sunny"], [Echo()], live=True, chunk_size=4)
    assert harness.thought_text(0) == thought_steps(steps)[0].text
    assert "once I know" in harness.thought_text(0)
    assert final(steps).text == "sunny"


def test_without_callbacks_nothing_is_streamed_and_the_run_is_the_same(harness):
    with_live = harness.run([ADD, ANSWER], [Adder()], live=True)
    other = type(harness)()
    without = other.run([ADD, ANSWER], [Adder()], stream=False)
    strip = lambda steps: [s for s in steps if not isinstance(s, ModelCallRecord)]  # noqa: E731
    assert [type(s) for s in strip(with_live)] == [type(s) for s in strip(without)]
    assert [getattr(s, "text", None) for s in strip(with_live)] == [
        getattr(s, "text", None) for s in strip(without)
    ]
    assert other.thoughts == []
    assert other.deltas == []


# -- native mode ------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 4])
def test_native_answer_streams_token_by_token(harness, chunk_size):
    text = "The sum is 5, as the adder said."
    steps = harness.run([text], mode="tools", live=True, chunk_size=chunk_size)
    assert len(harness.deltas) > 3
    assert "".join(harness.deltas) == final(steps).text == text
    assert harness.resets == 0


def test_native_text_before_tool_calls_is_reset_and_becomes_the_thought(harness):
    replies = [tool_calls(("echo", '{"text": "x"}'), text="Let me echo it."), "Done."]
    steps = harness.run(replies, [Echo()], mode="tools", live=True, chunk_size=2)
    assert harness.resets == 1
    assert "".join(harness.deltas) == "Done."
    assert harness.thought_text(0) == thought_steps(steps)[0].text == "Let me echo it."
    # The reset comes before the thought's delta, and both before the call's ThoughtStep.
    kinds = [kind for kind, _ in harness.log]
    thought_step_at = next(
        i for i, (kind, item) in enumerate(harness.log) if isinstance(item, ThoughtStep)
    )
    assert kinds.index("reset") < kinds.index("thought") < thought_step_at


def test_native_answer_label_is_not_streamed(harness):
    steps = harness.run(["  Final Answer: 42 it is"], mode="tools", live=True, chunk_size=1)
    assert "".join(harness.deltas) == final(steps).text == "42 it is"


def test_native_without_a_reset_callback_sends_the_answer_in_one_piece(harness):
    steps = harness.run(["The answer."], mode="tools", chunk_size=2)
    assert harness.deltas == [final(steps).text]


def test_native_silent_tool_calls_send_no_thought(harness):
    harness.run([tool_calls(("echo", '{"text": "x"}')), "ok"], [Echo()], mode="tools", live=True)
    assert harness.thoughts == []
    assert harness.resets == 0


def test_native_limit_call_streams_its_answer(harness):
    replies = [tool_calls(("echo", '{"text": "x"}')), "Out of steps, but: x."]
    config = AgentConfig(max_iterations=1)
    steps = harness.run(replies, [Echo()], mode="tools", live=True, config=config, chunk_size=3)
    assert final(steps).stop_reason == "max_iterations"
    assert len(harness.deltas) > 1
    assert "".join(harness.deltas) == final(steps).text


# -- the filters against the parser ----------------------------------------------------------

REPLIES = [
    ADD,
    ANSWER,
    "I must add first.\nThought: really\nAction: adder\nAction Input: 1 2",
    "**Thought:** bold\n**Action:** adder\n**Action Input:** 1 2",
    "Thought: x Action: adder Action Input: 2 3",
    "Thought: No further Action: needed.\nFinal Answer: 42",
    "Thought: one line Final Answer: 42",
    "Thought: a\n\n   \nQuestion: b\nThought:   c  \nAction: a\nAction Input: 1",
    "思考：我需要计算\n行动：adder\n行动输入：1",
    'Thought: json\n```json\n{"action": "adder", "action_input": {"a": 1}}\n```',
    "```\nThought: fenced\nFinal Answer: 42\n```",
    "Thought: trailing stars **\nAction: a\nAction Input: 1",
    "Thought: invented\nObservation: 3\nFinal Answer: 3",
    "Thought: Action: None\nFinal Answer: 7",
    "Thought: x\nAction: None\nFinal Answer: nothing to do",
    "Final Answer: ```\ncode\n```",
    "Final Answer: done\n```",
    "Thought: neither",
    "Thought: x\nAction: search\nAction Input: cats\nFinal Answer: 42",  # the call decides
]


@pytest.mark.parametrize("text", REPLIES)
@pytest.mark.parametrize("chunk_size", [1, 2, 5, 1000])
def test_streams_send_prefixes_of_what_parse_returns(text, chunk_size):
    thought = feed(ThoughtStream(lambda _: None), text, chunk_size)
    answer = feed(AnswerStream(lambda _: None), text, chunk_size)
    try:
        parsed = parse(text)
    except ParseError:
        assert answer.sent == ""
        return
    assert parsed.thought.startswith(thought.sent), (thought.sent, parsed.thought)
    if isinstance(parsed, ParsedFinalAnswer):
        assert parsed.answer.startswith(answer.sent)
    else:
        assert answer.sent == ""


@pytest.mark.parametrize("text", [r for r in REPLIES if "```" not in r and "{" not in r])
@pytest.mark.parametrize("chunk_size", [1, 3])
def test_streamed_thought_is_the_whole_thought_for_plain_replies(text, chunk_size):
    thought = feed(ThoughtStream(lambda _: None), text, chunk_size)
    try:
        parsed = parse(text)
    except ParseError:
        return
    if "Final Answer:" in text and not text.split("Final Answer:")[0].endswith("\n"):
        return  # a one-line answer is known only at the end; the executor sends the rest
    assert thought.sent == parsed.thought


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("42", "42"),
        ("  \n Final Answer: 42", "42"),  # a leading label on the first line is dropped
        ("**Final Answer:** yes", "yes"),
        ("Finally, yes.", "Finally, yes."),
        ("   ", ""),
        ("# Title\nbody", "# Title\nbody"),
        ("\n\n42\n", "42"),
        ("Final Answer: *", "*"),
        (" Hello", "Hello"),  # one leading space: the answer starts at its first letter
        ("XML, then X", "XML, then X"),  # letters at either end are the answer's own
        ("Final Answer: first\nsecond\n", "first\nsecond"),  # the label's line is the first
        ("\nFinal Answer: 42", "42"),  # a label after a leading blank line is dropped
        ("\n\nFinal Answer: 42", "42"),
        ("**Final Answer:**", ""),
    ],
)
@pytest.mark.parametrize("chunk_size", [1, 2, 1000])
def test_native_stream_sends_exactly_the_native_answer(text, answer, chunk_size):
    pieces: list[str] = []
    stream = feed(NativeAnswerStream(pieces.append), text, chunk_size)
    assert stream.sent == native_answer(text) == answer
    # Each piece becomes a frame on the socket: none is empty.
    assert "" not in pieces
    assert "".join(pieces) == answer


def test_thought_delta_shape():
    delta = ThoughtDelta(call_index=2, offset=5, text="abc")
    assert (delta.call_index, delta.offset, delta.text, delta.done) == (2, 5, "abc", False)


def test_final_answer_step_is_unchanged_by_streaming(harness):
    steps = harness.run([ANSWER], live=True, chunk_size=1)
    assert isinstance(steps[-1], FinalAnswerStep)
    assert steps[-1].text == "It is 5.\nSee above."


def test_cancellation_is_checked_while_streaming_without_any_stream_callback():
    asked = {"n": 0}

    def cancel_once_text_flows() -> bool:
        asked["n"] += 1
        return asked["n"] > 1  # the check before the call says no, the next says yes

    model = ScriptedChatModel([ADD], chunk_size=1)
    executor = AgentExecutor(
        model=model, tools=[Adder()], prompt=PromptConfig(), should_cancel=cancel_once_text_flows
    )
    with pytest.raises(RunCancelled):
        list(executor.run("q"))
    assert model.calls[0].streamed
    assert model.calls[0].interrupted


def test_no_should_cancel_means_no_text_callback_when_nothing_streams():
    model = ScriptedChatModel(["Final Answer: 1"])
    executor = AgentExecutor(model=model, tools=[], prompt=PromptConfig())
    list(executor.run("q"))
    assert not model.calls[0].streamed


# -- the executor's live text against its steps, on generated replies --------------------------

PIECES = st.sampled_from(
    [
        "Thought: ",
        "Action: ",
        "echo",
        "Action Input: ",
        "Final Answer: ",
        "Observation: ",
        "final answer: ",
        "**Action:** ",
        "思考：",
        "最终答案：",
        "```",
        "{",
        "}",
        "\n",
        "\n\n",
        "  ",
        "None",
        "Obs",
        "plan",
        "the sum is 5",
        "*",
        "no further Action: needed",
    ]
)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(st.lists(PIECES, min_size=1, max_size=25).map("".join), st.sampled_from([1, 2, 5]))
def test_live_text_equals_the_stored_steps_on_generated_replies(text, chunk_size):
    harness = Harness()
    config = AgentConfig(max_iterations=1)
    steps = harness.run(
        [text, "Final Answer: done"], [Echo()], live=True, config=config, chunk_size=chunk_size
    )
    call_index = None
    for step in steps:
        if isinstance(step, ModelCallRecord):
            call_index = step.index
        elif isinstance(step, ThoughtStep):
            assert harness.thought_text(call_index) == step.text, (text, step.text)
    # Every call that sent thought text closed it with exactly one "done", last.
    for index in {delta.call_index for delta in harness.thoughts}:
        deltas = [delta for delta in harness.thoughts if delta.call_index == index]
        assert [delta.done for delta in deltas].count(True) == 1
        assert deltas[-1].done
    assert "".join(harness.deltas) == final(steps).text


# -- the filters at their edges ---------------------------------------------------------------


def fed(stream, *chunks: str):
    for chunk in chunks:
        stream.feed(chunk)
    return stream


@pytest.mark.parametrize(
    "text",
    [
        ANSWER,
        "Final Answer: I will act",  # a last word that could still have become a label
        "Final Answer: Xavier will act",
        "Thought: x\nAction: None\nFinal Answer: I will act",
        "**Thought:** bold labels\nFinal Answer: 42 is the answer.",
        "Final Answer:\n** note the stars",
        "Final Answer: ```\ncode\n```",  # a code block, not a reply wrapped in a fence
        "Final Answer: the label Final Answer: is what I write",  # mid-line: the answer's own
        "Final Answer: 42\n        ```",  # a leftover fence, however deep, is never sent
    ],
)
@pytest.mark.parametrize("chunk_size", [1, 2, 1000])
def test_the_answer_stream_sends_the_whole_answer_once_in_pieces_none_empty(text, chunk_size):
    deltas: list[str] = []
    stream = feed(AnswerStream(deltas.append), text, chunk_size)

    parsed = parse(text)
    assert isinstance(parsed, ParsedFinalAnswer)
    assert stream.sent == parsed.answer
    assert "".join(deltas) == parsed.answer
    assert "" not in deltas


def test_an_answer_ending_in_a_letter_streams_whole_before_the_reply_ends():
    assert fed(AnswerStream(lambda _: None), "Final Answer: Roman ten is X").sent == (
        "Roman ten is X"
    )


def test_the_thought_before_an_invented_observation_is_sent_when_both_arrive_together():
    assert fed(ThoughtStream(lambda _: None), "Thought: a\nObservation: 5").sent == "a"


def test_text_after_the_end_of_a_stream_changes_nothing():
    stream = feed(AnswerStream(lambda _: None), "Final Answer: I will act", 1000)
    stream.feed(" more")
    stream.finish()
    assert stream.sent == "I will act"


@pytest.mark.parametrize(
    ("chunks", "sent"),
    [
        # A line that is only a fence so far may be the end of a fenced reply: held.
        (("Final Answer: see\n`",), "see"),
        # An answer that so far is only the start of a fence, on its label's line: held too.
        (("Thought: x\nFinal Answer: ``",), ""),
        (("Final Answer: see\n\t      ``",), "see"),  # indented any depth: still held
        # A line that cannot be one is passed on at once.
        (("Final Answer: see\nX`",), "see\nX`"),
        (("Final Answer: see\n X`",), "see\n X`"),  # indented by one space, or three
        (("Final Answer: see\n   X`",), "see\n   X`"),
        (("Final Answer: see\nx\n```",), "see\nx"),
        (("Final Answer: wrap it in          `",), "wrap it in          `"),
    ],
)
def test_the_answer_stream_holds_back_only_a_line_that_may_be_a_fence(chunks, sent):
    assert fed(AnswerStream(lambda _: None), *chunks).sent == sent


def test_a_line_too_long_to_be_a_label_streams_as_thought_at_once():
    label_like = "Action" + "_" * 34  # a label's first letter to its colon is at most 40
    stream = fed(ThoughtStream(lambda _: None), f"Thought: ok\n{label_like}")
    assert stream.sent == f"ok\n{label_like}"


def test_the_whole_thought_is_sent_when_the_action_label_arrives():
    stream = fed(ThoughtStream(lambda _: None), "Thought: I will act\nAction: calculator\n")
    assert stream.sent == "I will act"


def test_an_invented_observation_never_streams_as_thought():
    text = "Thought: a\nObservation: the tool says 5\nThought: b\nFinal Answer: 5"
    stream = feed(ThoughtStream(lambda _: None), text, 1)
    assert "the tool says" not in stream.sent
    assert stream.sent == "a"


@pytest.mark.parametrize("chunk_size", [1, 1000])
def test_a_mid_line_answer_then_a_new_thought_stops_the_stream_at_a_prefix(chunk_size):
    text = "Thought: a Final Answer: b\nThought: c\nAction: calculator\nAction Input: 1"
    stream = feed(ThoughtStream(lambda _: None), text, chunk_size)
    thought = parse(text).thought
    assert thought == "a Final Answer: b\nc"
    assert thought.startswith(stream.sent)


def test_a_word_glued_to_the_first_character_streams_though_it_ends_like_a_label():
    """ "xObserv" cannot become "Observation:" (a label is a word of its own), so nothing is
    held back for it, from the reply's first character on."""
    assert fed(ThoughtStream(lambda _: None), "xObserv").sent == "xObserv"
