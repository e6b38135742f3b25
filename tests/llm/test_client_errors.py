"""A model endpoint's errors carry no secret: not the API key, not the base URL's
``user:password@``, in whatever form the server echoes them."""

from __future__ import annotations

import base64
import json
import socket
from urllib.parse import quote

import pytest

from agents.llm.client import OpenAIChatModel
from agents.llm.scripted import Fail
from agents.react.errors import ModelAuthError, ModelBadResponse, ModelUnavailable

QUESTION = [{"role": "user", "content": "hi"}]
API_KEY = "sk-test+Key/With=Odd&Chars%1"
PASSWORD = "pa:ss/w+rd="


def _leaks(text: str) -> list[str]:
    forms = {
        "key": API_KEY,
        "key, url-encoded": quote(API_KEY, safe=""),
        "key, json-escaped": json.dumps(API_KEY)[1:-1],
        "password": PASSWORD,
        "password, url-encoded": quote(PASSWORD, safe=""),
        "basic auth": base64.b64encode(f"scout:{PASSWORD}".encode()).decode()[8:20],
    }
    return [name for name, form in forms.items() if form in text]


def _model(base_url: str, model: str) -> OpenAIChatModel:
    return OpenAIChatModel(base_url=base_url, api_key=API_KEY, model=model, max_retries=0)


def _with_credentials(base_url: str) -> str:
    scheme, rest = base_url.split("://", 1)
    return f"{scheme}://scout:{quote(PASSWORD, safe='')}@{rest}"


def test_an_error_body_that_echoes_the_key_and_url_is_redacted(scripted_server, model_name):
    url = _with_credentials(scripted_server.base_url)
    echoed = (
        f"upstream {url} refused key {API_KEY} ({quote(API_KEY, safe='')}), "
        f"auth was Basic {base64.b64encode(f'scout:{PASSWORD}'.encode()).decode()}"
    )
    scripted_server.script(model_name, [Fail(500, body={"error": {"message": echoed}})])

    with pytest.raises(ModelUnavailable) as raised:
        _model(url, model_name).complete(QUESTION)

    detail = str(raised.value)
    assert _leaks(detail) == [], detail
    assert "[secret]" in detail
    assert "(500)" in detail  # the detail staff need is still there
    assert raised.value.code == "model_server_error"
    assert raised.value.status_code == 500
    assert raised.value.__cause__ is None
    assert raised.value.__context__ is None


@pytest.mark.parametrize("status", [401, 400])
def test_refusals_that_quote_the_key_are_redacted(scripted_server, model_name, status):
    body = {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}
    scripted_server.script(model_name, [Fail(status, body=body)])

    with pytest.raises(ModelAuthError if status == 401 else ModelBadResponse) as raised:
        _model(scripted_server.base_url, model_name).complete(QUESTION)

    assert _leaks(str(raised.value)) == []
    assert "Incorrect API key provided: [secret]" in str(raised.value)


def test_an_unreachable_endpoint_does_not_show_its_credentials(model_name):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = _model(_with_credentials(f"http://127.0.0.1:{port}/v1"), model_name)

    with pytest.raises(ModelUnavailable) as raised:
        model.complete(QUESTION)

    assert _leaks(str(raised.value)) == []
    assert f"127.0.0.1:{port}" in str(raised.value)
    assert _leaks(repr(model)) == []


def test_users_get_a_plain_reason_and_a_reference():
    from agents.llm.errors import public_failure_message

    error = ModelAuthError("http://10.0.0.5:8000/v1 rejected the API key (401): nope")
    message = public_failure_message(error, reference="run 42")
    assert message == (
        "The AI model service did not accept this site's credentials. The site's staff can fix "
        "this. (Reference: run 42.)"
    )
    assert "10.0.0.5" not in message
    unknown = public_failure_message(ModelUnavailable("x", code="model_new"), reference="run 1")
    assert unknown.startswith("The AI model could not answer.")


def _public_words(error: Exception) -> str:
    from agents.llm.errors import public_failure_message

    return public_failure_message(error, reference="run 7")  # type: ignore[arg-type]


def test_each_cause_of_a_failure_has_its_own_plain_words(scripted_server, model_name):
    """A server error, a refused connection, a timeout and a bad key each say what happened,
    with the reference staff look up and no error code (issue 42, defect 6)."""
    from agents.react.errors import ModelTimeout

    scripted_server.script(model_name, [Fail(500)])
    with pytest.raises(ModelUnavailable) as server_error:
        _model(scripted_server.base_url, model_name).complete(QUESTION)

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with pytest.raises(ModelUnavailable) as refused:
        _model(f"http://127.0.0.1:{closed_port}/v1", model_name).complete(QUESTION)

    scripted_server.script(model_name, [Fail(401)])
    with pytest.raises(ModelAuthError) as bad_key:
        _model(scripted_server.base_url, model_name).complete(QUESTION)

    said = {
        "server": _public_words(server_error.value),
        "refused": _public_words(refused.value),
        "timeout": _public_words(ModelTimeout("m at http://127.0.0.1:1/v1 did not finish")),
        "key": _public_words(bad_key.value),
    }
    assert said["server"].startswith("The AI model's server reported an error.")
    assert said["refused"].startswith("The AI model's server could not be reached.")
    assert said["timeout"].startswith("The AI model took too long to answer.")
    assert said["key"].startswith("The AI model service did not accept this site's credentials.")
    assert len(set(said.values())) == len(said)
    for words in said.values():
        assert words.endswith("(Reference: run 7.)")
        for detail in ("model_", "500", "127.0.0.1"):
            assert detail not in words
