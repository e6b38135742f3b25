"""The scripted chat model the engine's tests rely on behaves like a server would."""

from __future__ import annotations

import pytest

from agents.react.errors import ModelBadResponse, ModelTimeout
from agents.react.testing import ScriptedChatModel, tool_calls
from agents.react.types import Completion


def test_replies_in_order_and_records_calls():
    model = ScriptedChatModel(["one", Completion(text="two", prompt_tokens=7)])
    first = model.complete([{"role": "user", "content": "a"}], temperature=0.1)
    second = model.complete([{"role": "user", "content": "b"}], stop=["\nX:"])
    assert (first.text, second.text, second.prompt_tokens) == ("one", "two", 7)
    assert [call.last_content for call in model.calls] == ["a", "b"]
    assert model.calls[0].temperature == 0.1
    assert model.calls[1].stop == ["\nX:"]


def test_honours_stop_unless_told_not_to():
    text = "Action: a\nAction Input: b\nObservation: made up"
    assert ScriptedChatModel([text]).complete([], stop=["\nObservation:"]).text == (
        "Action: a\nAction Input: b"
    )
    assert (
        ScriptedChatModel([text], honour_stop=False).complete([], stop=["\nObservation:"]).text
        == text
    )


def test_streams_in_chunks():
    chunks = []
    ScriptedChatModel(["abcdefg"], chunk_size=3).complete([], on_text=chunks.append)
    assert chunks == ["abc", "def", "g"]


def test_raises_scripted_errors_and_runs_out_clearly():
    model = ScriptedChatModel([ModelTimeout("too slow")])
    with pytest.raises(ModelTimeout):
        model.complete([])
    with pytest.raises(ModelBadResponse, match="no reply left"):
        model.complete([])


def test_a_reply_can_depend_on_the_request():
    model = ScriptedChatModel([lambda call: f"you said {call.last_content}"])
    assert model.complete([{"role": "user", "content": "hi"}]).text == "you said hi"


def test_tool_call_replies():
    completion = tool_calls(("adder", "{}"), ("echo", '{"text": "x"}'), text="t")
    assert [(c.id, c.name) for c in completion.tool_calls] == [
        ("call_1", "adder"),
        ("call_2", "echo"),
    ]
    assert completion.text == "t"
