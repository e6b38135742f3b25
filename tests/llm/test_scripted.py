"""The scripted server speaks enough of the OpenAI API for the real SDK, and can be programmed."""

from __future__ import annotations

import json
import socket
import threading
import urllib.request

import openai
import pytest

from agents.llm.scripted import Fail, Gate, Reply, ScriptedServer, ToolCalls, reply_from_dict

QUESTION = [{"role": "user", "content": "hello"}]


def _post(url: str, payload: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def sdk(scripted_server):
    return openai.OpenAI(base_url=scripted_server.base_url, api_key="k", max_retries=0)


def test_non_streaming_completion_with_tool_calls_and_usage(scripted_server, model_name, sdk):
    scripted_server.script(model_name, [ToolCalls([("calculator", {"expression": "2*3"})])])

    completion = sdk.chat.completions.create(model=model_name, messages=QUESTION)

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls[0].function.name == "calculator"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"expression": "2*3"}
    assert completion.usage.prompt_tokens > 0


def test_non_streaming_honours_stop_and_can_omit_usage(scripted_server, model_name, sdk):
    scripted_server.script(model_name, [Reply("one STOP two", usage=False)])

    completion = sdk.chat.completions.create(model=model_name, messages=QUESTION, stop="STOP")

    assert completion.choices[0].message.content == "one "
    assert completion.usage is None


def test_streaming_sends_usage_only_when_asked(scripted_server, model_name, sdk):
    scripted_server.script(model_name, [Reply("abc"), Reply("abc")])

    plain = list(sdk.chat.completions.create(model=model_name, messages=QUESTION, stream=True))
    with_usage = list(
        sdk.chat.completions.create(
            model=model_name,
            messages=QUESTION,
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    assert all(chunk.usage is None for chunk in plain)
    assert with_usage[-1].usage.completion_tokens > 0


def test_a_gate_holds_the_reply_until_the_test_opens_it(scripted_server, model_name, sdk):
    gate = Gate()
    scripted_server.script(model_name, [gate.hold(Reply("held")), Reply("next")])
    answers: list[str] = []
    asking = threading.Thread(
        target=lambda: answers.append(
            sdk.chat.completions.create(model=model_name, messages=QUESTION)
            .choices[0]
            .message.content
        )
    )
    asking.start()

    gate.wait_arrived()
    assert len(scripted_server.requests(model_name)) == 1
    assert answers == []
    assert asking.is_alive()
    gate.open()
    asking.join(timeout=30)
    assert answers == ["held"]


def test_waiting_on_a_gate_no_request_reaches_fails_loudly():
    gate = Gate()
    with pytest.raises(TimeoutError, match=r"no request reached the gate within 0\.1 s"):
        gate.wait_arrived(timeout=0.1)
    assert not gate.arrived


def test_models_lists_scripted_models(scripted_server, model_name, sdk):
    scripted_server.policy(model_name, lambda body: Reply("always this"))

    assert model_name in [model.id for model in sdk.models.list()]
    for _ in range(2):
        reply = sdk.chat.completions.create(model=model_name, messages=QUESTION)
        assert reply.choices[0].message.content == "always this"


def test_fail_sends_the_status_body_and_retry_after(scripted_server, model_name, sdk):
    scripted_server.script(model_name, [Fail(429, retry_after=7)])

    with pytest.raises(openai.RateLimitError) as raised:
        sdk.chat.completions.create(model=model_name, messages=QUESTION)

    assert raised.value.response.headers["Retry-After"] == "7"
    assert raised.value.code == "rate_limit_exceeded"


def test_control_api_scripts_replies_and_reports_requests(scripted_server, model_name, sdk):
    root = scripted_server.base_url.removesuffix("/v1")
    status, body = _post(
        f"{root}/_control/script",
        {
            "model": model_name,
            "responses": [
                {"type": "reply", "text": "from another process"},
                {"type": "fail", "status": 500},
            ],
        },
    )
    assert (status, body) == (200, {"queued": 2})

    reply = sdk.chat.completions.create(model=model_name, messages=QUESTION)
    with pytest.raises(openai.InternalServerError):
        sdk.chat.completions.create(model=model_name, messages=QUESTION)

    assert reply.choices[0].message.content == "from another process"
    url = f"{root}/_control/requests?model={model_name}"
    with urllib.request.urlopen(url) as response:
        recorded = json.loads(response.read())
    assert [r["messages"] for r in recorded] == [QUESTION, QUESTION]


def test_control_api_rejects_a_bad_script(scripted_server, model_name):
    root = scripted_server.base_url.removesuffix("/v1")

    status, body = _post(
        f"{root}/_control/script", {"model": model_name, "responses": [{"type": "poem"}]}
    )

    assert status == 400
    assert "poem" in body["error"]["message"]
    assert scripted_server.pending(model_name) == 0


def test_reply_from_dict_builds_every_kind():
    assert reply_from_dict({"text": "x"}) == Reply("x")
    assert reply_from_dict({"type": "fail", "insufficient_quota": True}).status == 429
    calls = reply_from_dict({"type": "tool_calls", "calls": [{"name": "t", "arguments": {}}]})
    assert calls.tool_calls[0].name == "t"
    assert reply_from_dict({"type": "hang", "seconds": 1}).seconds == 1


def test_a_burst_of_connections_waits_to_be_accepted_instead_of_being_dropped():
    # Hundreds of runs call the model at once under load. With socketserver's default listen
    # backlog (5) the kernel dropped the connections past it, and each was retried a second
    # later: a pause no real endpoint adds. Nothing accepts here (the server is not started),
    # so every connection below is one the kernel queued.
    server = ScriptedServer()
    host, port = server._httpd.server_address[:2]
    clients = []
    try:
        for _ in range(200):
            clients.append(socket.create_connection((host, port), timeout=0.5))
    finally:
        for client in clients:
            client.close()
        server.stop()
    assert len(clients) == 200


def test_embeddings_are_deterministic_unit_vectors_near_for_shared_words(scripted_server):
    client = openai.OpenAI(base_url=scripted_server.base_url, api_key="x", max_retries=0)
    texts = ["refund paid to the card", "the card refund", "蛋糕很好吃"]
    response = client.embeddings.create(model="emb", input=texts, encoding_format="float")
    vectors = [row.embedding for row in sorted(response.data, key=lambda row: row.index)]
    assert [len(vector) for vector in vectors] == [64, 64, 64]
    assert all(abs(sum(v * v for v in vector) - 1) < 1e-9 for vector in vectors)

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    again = client.embeddings.create(model="emb", input=texts[0], encoding_format="float")
    assert again.data[0].embedding == vectors[0]
    assert [body["input"] for body in scripted_server.requests("emb")] == [texts, texts[0]]


def test_embeddings_refuse_bad_input_and_answer_a_queued_failure(scripted_server):
    status, body = _post(f"{scripted_server.base_url}/embeddings", {"model": "emb", "input": [1]})
    assert status == 400
    assert "'input' must be a string or a list of strings" in body["error"]["message"]
    scripted_server.script("emb", [Fail(503)])
    status, _ = _post(f"{scripted_server.base_url}/embeddings", {"model": "emb", "input": "a"})
    assert status == 503
    status, body = _post(f"{scripted_server.base_url}/embeddings", {"model": "emb", "input": "a"})
    assert status == 200
    assert len(body["data"][0]["embedding"]) == 64
