"""ModelConfig "Check connection": one cheap call, the result in plain words."""

from __future__ import annotations

import socket

import pytest
from django.urls import reverse

from agents.llm.scripted import Fail, Hang, Reply
from agents.models import ModelConfig
from tests.admin.conftest import page_text


def _check(client, model_config) -> str:
    url = reverse("admin:agents_modelconfig_check", args=[model_config.pk])
    return page_text(client.post(url, follow=True))


@pytest.mark.django_db
def test_check_connection_ok(staff_client, scripted_server, scripted_endpoint):
    scripted_server.script(scripted_endpoint.model, [Reply("OK")])

    body = _check(staff_client, scripted_endpoint)

    assert f"OK: {scripted_endpoint.model} at {scripted_server.base_url} answered in" in body
    (request,) = scripted_server.requests(scripted_endpoint.model)
    assert request["messages"][0]["content"] == "Reply with the single word OK."


@pytest.mark.django_db
def test_check_connection_authentication_failed(staff_client, scripted_server, scripted_endpoint):
    scripted_server.script(scripted_endpoint.model, [Fail(401)])
    body = _check(staff_client, scripted_endpoint)
    assert "Authentication failed" in body
    assert "sk-scripted-key-for-tests" not in body


@pytest.mark.django_db
def test_check_connection_timed_out(staff_client, scripted_server, scripted_endpoint):
    scripted_endpoint.request_timeout_seconds = 1
    scripted_endpoint.save()
    scripted_server.script(scripted_endpoint.model, [Hang(seconds=10)])
    assert "Timed out" in _check(staff_client, scripted_endpoint)


@pytest.mark.django_db
def test_check_connection_cannot_connect(staff_client):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model_config = ModelConfig.objects.create(
        name="Nowhere", base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=0
    )
    assert f"Could not connect to http://127.0.0.1:{port}/v1" in _check(staff_client, model_config)


@pytest.mark.django_db
def test_check_connection_action_on_the_list(staff_client, scripted_server, scripted_endpoint):
    scripted_server.script(scripted_endpoint.model, [Reply("OK")])
    response = staff_client.post(
        reverse("admin:agents_modelconfig_changelist"),
        {"action": "check_connection", "_selected_action": [scripted_endpoint.pk]},
        follow=True,
    )
    assert f"{scripted_endpoint.name}: OK" in page_text(response)
