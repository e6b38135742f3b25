"""OpenAIChatModel against a real scripted server, through the real openai SDK."""

from __future__ import annotations

import json
import threading

import pytest

from agents.llm.client import OpenAIChatModel, _Attempt
from agents.llm.scripted import Fail, Hang, Reply, ScriptedServer, ToolCalls
from agents.llm.tokens import count_message_tokens, count_tokens
from agents.react.errors import (
    ModelAuthError,
    ModelBadResponse,
    ModelQuotaError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
    RunCancelled,
)

QUESTION = [{"role": "user", "content": "what is (28+10)*3?"}]


def test_streams_text_deltas_and_returns_the_whole_text(scripted_server, model_name, make_model):
    scripted_server.script(model_name, [Reply("The answer is 114, computed.", chunk_size=5)])
    deltas: list[str] = []

    completion = make_model().complete(QUESTION, on_text=deltas.append)

    assert completion.text == "The answer is 114, computed."
    assert len(deltas) > 1
    assert "".join(deltas) == completion.text
    assert completion.finish_reason == "stop"
    request = scripted_server.requests(model_name)[0]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["messages"] == QUESTION


def test_tool_call_deltas_are_assembled(scripted_server, model_name, make_model):
    scripted_server.script(
        model_name,
        [
            ToolCalls(
                [
                    ("calculator", {"expression": "(28+10)*3"}),
                    {"name": "current_time", "arguments": {}, "id": "call_time"},
                ],
                text="Let me compute.",
                chunk_size=3,
            )
        ],
    )
    tools = [{"type": "function", "function": {"name": "calculator", "parameters": {}}}]

    completion = make_model().complete(QUESTION, tools=tools)

    assert completion.text == "Let me compute."
    assert completion.finish_reason == "tool_calls"
    first, second = completion.tool_calls
    assert first.name == "calculator"
    assert json.loads(first.arguments) == {"expression": "(28+10)*3"}
    assert first.id
    assert (second.id, second.name, second.arguments) == ("call_time", "current_time", "{}")
    assert scripted_server.requests(model_name)[0]["tools"] == tools


def test_stop_sequences_are_sent_and_honoured(scripted_server, model_name, make_model):
    scripted_server.script(
        model_name, [Reply("Action: calculator\nAction Input: 1+1\nObservation: 3 (invented)")]
    )

    completion = make_model().complete(QUESTION, stop=["\nObservation:"])

    assert completion.text == "Action: calculator\nAction Input: 1+1"
    assert scripted_server.requests(model_name)[0]["stop"] == ["\nObservation:"]


def test_a_server_that_ignores_stop_returns_everything(scripted_server, model_name, make_model):
    text = "Action: calculator\nAction Input: 1+1\nObservation: 3 (invented)"
    scripted_server.script(model_name, [Reply(text, ignore_stop=True)])

    assert make_model().complete(QUESTION, stop=["\nObservation:"]).text == text


def test_usage_comes_from_the_server_when_sent(scripted_server, model_name, make_model):
    scripted_server.script(model_name, [Reply("Hello there")])

    completion = make_model().complete(QUESTION)

    assert completion.prompt_tokens == count_message_tokens(QUESTION, model_name)
    assert completion.completion_tokens == count_tokens("Hello there")
    assert completion.duration_ms >= 0


def test_usage_is_counted_locally_when_the_server_sends_none(
    scripted_server, model_name, make_model
):
    scripted_server.script(model_name, [Reply("A reply without usage, counted here", usage=False)])

    completion = make_model().complete(QUESTION)

    assert completion.prompt_tokens == count_message_tokens(QUESTION, model_name)
    assert completion.completion_tokens == count_tokens("A reply without usage, counted here")
    assert completion.completion_tokens > 0


def test_temperature_defaults_to_the_models_and_can_be_overridden(
    scripted_server, model_name, make_model
):
    scripted_server.script(model_name, [Reply("a"), Reply("b")])
    model = make_model(default_temperature=0.2)

    model.complete(QUESTION)
    model.complete(QUESTION, temperature=0.9)

    first, second = scripted_server.requests(model_name)
    assert (first["temperature"], second["temperature"]) == (0.2, 0.9)


def test_falls_back_when_the_server_refuses_stream_options(model_name):
    with ScriptedServer(reject_stream_options=True) as server:
        server.script(model_name, [Reply("still works", usage=False)])
        model = OpenAIChatModel(
            base_url=server.base_url, api_key="k", model=model_name, max_retries=0
        )

        completion = model.complete(QUESTION)

        assert completion.text == "still works"
        assert completion.completion_tokens == count_tokens("still works")
        assert "stream_options" not in server.requests(model_name)[-1]


def test_retries_429_with_retry_after_then_500_then_succeeds(
    scripted_server, model_name, make_model
):
    scripted_server.script(
        model_name, [Fail(429, retry_after=0.05), Fail(500), Reply("third time lucky")]
    )

    completion = make_model(max_retries=2).complete(QUESTION)

    assert completion.text == "third time lucky"
    assert len(scripted_server.requests(model_name)) == 3


def test_a_retry_after_beyond_the_deadline_fails_at_once(scripted_server, model_name, make_model):
    scripted_server.script(model_name, [Fail(429, retry_after=3600), Reply("too late")])

    with pytest.raises(ModelRateLimited):
        make_model(deadline_seconds=5).complete(QUESTION)

    assert len(scripted_server.requests(model_name)) == 1


def test_gives_up_after_max_retries(scripted_server, model_name, make_model):
    scripted_server.script(model_name, [Fail(503, retry_after=0), Fail(503, retry_after=0)] * 2)

    with pytest.raises(ModelUnavailable) as raised:
        make_model(max_retries=1).complete(QUESTION)

    assert raised.value.status_code == 503
    # Reached, and failing behind: not "could not be reached" (issue 42).
    assert raised.value.code == "model_server_error"
    assert len(scripted_server.requests(model_name)) == 2


def test_persistent_rate_limit_raises_rate_limited(scripted_server, model_name, make_model):
    scripted_server.script(model_name, [Fail(429, retry_after=0)] * 3)

    with pytest.raises(ModelRateLimited):
        make_model(max_retries=2).complete(QUESTION)

    assert len(scripted_server.requests(model_name)) == 3


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_is_not_retried(scripted_server, model_name, make_model, status):
    scripted_server.script(model_name, [Fail(status), Reply("never reached")])

    with pytest.raises(ModelAuthError) as raised:
        make_model().complete(QUESTION)

    assert raised.value.code == "model_auth"
    assert str(status) in str(raised.value)
    assert len(scripted_server.requests(model_name)) == 1


def test_insufficient_quota_is_not_retried(scripted_server, model_name, make_model):
    scripted_server.script(model_name, [Fail.insufficient_quota(), Reply("never reached")])

    with pytest.raises(ModelQuotaError) as raised:
        make_model().complete(QUESTION)

    assert "quota" in str(raised.value)
    assert len(scripted_server.requests(model_name)) == 1


def test_a_rejected_request_is_a_bad_response_without_retry(
    scripted_server, model_name, make_model
):
    body = {"error": {"message": "context length exceeded", "type": "invalid_request_error"}}
    scripted_server.script(model_name, [Fail(400, body), Reply("never reached")])

    with pytest.raises(ModelBadResponse, match="context length exceeded"):
        make_model().complete(QUESTION)

    assert len(scripted_server.requests(model_name)) == 1


def test_an_unscripted_model_is_unavailable(scripted_server, model_name, make_model):
    with pytest.raises(ModelUnavailable, match="not found"):
        make_model().complete(QUESTION)


def test_deadline_on_a_server_that_never_answers(scripted_server, model_name, make_model):
    scripted_server.script(model_name, [Hang(30)])

    with pytest.raises(ModelTimeout) as raised:
        make_model(deadline_seconds=0.5).complete(QUESTION)

    assert raised.value.code == "model_timeout"


def test_deadline_on_a_stream_that_stalls_after_headers(scripted_server, model_name, make_model):
    scripted_server.script(model_name, [Hang(30, after_headers=True)])

    with pytest.raises(ModelTimeout):
        make_model(deadline_seconds=0.5).complete(QUESTION)


def test_deadline_on_a_slow_trickle(scripted_server, model_name, make_model):
    # Every chunk arrives well within a per-read timeout; only the overall deadline stops it.
    scripted_server.script(model_name, [Reply("x" * 200, chunk_size=1, chunk_interval=0.05)])
    deltas: list[str] = []

    with pytest.raises(ModelTimeout):
        make_model(deadline_seconds=0.5).complete(QUESTION, on_text=deltas.append)

    assert 0 < len(deltas) < 200


def test_unreachable_endpoint_is_unavailable():
    with ScriptedServer() as server:
        base_url = server.base_url
    model = OpenAIChatModel(base_url=base_url, api_key="k", model="m", max_retries=1)

    with pytest.raises(ModelUnavailable, match="cannot reach") as raised:
        model.complete(QUESTION)

    assert raised.value.code == "model_unavailable"


def test_an_exception_from_on_text_propagates_and_the_stream_is_closed(
    scripted_server, model_name, make_model
):
    scripted_server.script(
        model_name,
        [Reply("y" * 500, chunk_size=1, chunk_interval=0.01), Reply("next call works")],
    )
    seen: list[str] = []

    def cancel_after_three(text: str) -> None:
        seen.append(text)
        if len(seen) == 3:
            raise RunCancelled("stop")

    model = make_model()
    with pytest.raises(RunCancelled):
        model.complete(QUESTION, on_text=cancel_after_three)

    assert len(seen) == 3
    assert len(scripted_server.requests(model_name)) == 1
    assert model.complete(QUESTION).text == "next call works"


def test_a_stream_broken_after_text_was_delivered_is_not_retried(
    scripted_server, model_name, make_model
):
    scripted_server.script(
        model_name,
        [Reply("partial answer " * 20, chunk_size=4, chunk_interval=0.01), Reply("retry")],
    )
    deltas: list[str] = []
    model = make_model(deadline_seconds=0.3, max_retries=3)

    with pytest.raises(ModelTimeout):
        model.complete(QUESTION, on_text=deltas.append)

    assert deltas
    assert len(scripted_server.requests(model_name)) == 1


def test_concurrent_calls_keep_their_own_deadlines(scripted_server, model_name, make_model):
    slow_but_fine, stalled = f"{model_name}-fine", f"{model_name}-stalled"
    scripted_server.script(slow_but_fine, [Reply("z" * 40, chunk_size=1, chunk_interval=0.02)])
    scripted_server.script(stalled, [Hang(30, after_headers=True)])
    base_url = scripted_server.base_url
    results: dict[str, object] = {}

    def call(name: str, deadline: float) -> None:
        model = OpenAIChatModel(
            base_url=base_url, api_key="k", model=name, deadline_seconds=deadline
        )
        try:
            results[name] = model.complete(QUESTION).text
        except ModelTimeout as exc:
            results[name] = exc

    threads = [
        threading.Thread(target=call, args=(slow_but_fine, 30.0)),
        threading.Thread(target=call, args=(stalled, 0.3)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results[slow_but_fine] == "z" * 40
    assert isinstance(results[stalled], ModelTimeout)


def test_a_delay_before_the_first_token_within_the_deadline_is_fine(
    scripted_server, model_name, make_model
):
    scripted_server.script(model_name, [Reply("late but here", delay=0.1)])

    assert make_model(deadline_seconds=10).complete(QUESTION).text == "late but here"


def test_a_delay_before_the_first_token_past_the_deadline_times_out(
    scripted_server, model_name, make_model
):
    scripted_server.script(model_name, [Reply("never seen", delay=30)])

    with pytest.raises(ModelTimeout):
        make_model(deadline_seconds=0.3).complete(QUESTION)


def test_the_api_key_is_sent_as_a_bearer_token(model_name):
    with ScriptedServer(api_key="sk-right") as server:
        server.script(model_name, [Reply("welcome"), Reply("never reached")])

        def model(key: str) -> OpenAIChatModel:
            return OpenAIChatModel(
                base_url=server.base_url, api_key=key, model=model_name, max_retries=0
            )

        assert model("sk-right").complete(QUESTION).text == "welcome"
        with pytest.raises(ModelAuthError, match="Incorrect API key"):
            model("sk-wrong").complete(QUESTION)


def test_chunks_of_unexpected_shape_are_read_or_refused_clearly():
    attempt = _Attempt(on_text=None)

    def delta(**fields) -> dict:
        return {"choices": [{"index": 0, "delta": fields}]}

    for chunk in (
        {"choices": None, "usage": None},  # a keep-alive some servers send
        {"choices": [{"index": 0, "delta": None, "finish_reason": None}]},
        {"choices": [{"delta": {"content": "Hel"}}]},  # no index: the first choice
        {"choices": [{"index": 1, "delta": {"content": "other choice"}}]},
        delta(content="lo", tool_calls=None),
        delta(tool_calls=[{"id": "a", "function": {"name": "f"}}]),
        delta(tool_calls=[{"function": {"arguments": "{}"}}]),
        {"choices": [{"index": 0, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3}},
    ):
        attempt.add(chunk)

    assert "".join(attempt.text_parts) == "Hello"
    assert [(c.id, c.name, c.arguments) for c in attempt.tool_calls()] == [("a", "f", "{}")]
    assert attempt.finish_reason == "stop"
    assert attempt.usage == {"prompt_tokens": 3, "completion_tokens": 0}
    with pytest.raises(ModelBadResponse, match="not a JSON object"):
        attempt.add(["not", "an", "object"])
