"""A tool's secret never reaches a prompt, a step, an event, the API or a page.

The tool is an ``http_request`` whose Authorization header carries the secret, pointed at a
local server that echoes the header back, so the secret really travels and really comes back
in the response; everything after that must show it redacted.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse

from agents.llm.scripted import Reply
from agents.models import AgentProfile, AgentRun, ModelCall, RunEvent, ToolConfig
from agents.services.conversations import conversation_create
from tests.admin.conftest import page_text

SECRET = "sk-live-DO-NOT-LEAK-7f3a9c"


class _EchoHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen_authorization.append(self.headers.get("Authorization", ""))
        body = f"Weather for {self.path}: sunny. You sent: {self.headers.get('Authorization')}"
        payload = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args) -> None:
        pass


@pytest.fixture
def echo_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
    server.seen_authorization = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _create_weather_tool(client, echo_server) -> ToolConfig:
    port = echo_server.server_address[1]
    config = {
        "url_template": f"http://127.0.0.1:{port}/weather?city={{city}}",
        "headers": {"Authorization": "Bearer {secret:API_TOKEN}"},
        "allow_networks": ["127.0.0.1/32"],
    }
    response = client.post(
        reverse("admin:agents_toolconfig_add"),
        {
            "name": "weather",
            "kind": "http_request",
            "description": "The weather in a city. Input: the city.",
            "config": json.dumps(config),
            "secrets": f"API_TOKEN={SECRET}",
            "enabled": "on",
            "timeout_seconds": "10",
        },
    )
    assert response.status_code == 302, page_text(response)
    return ToolConfig.objects.get(name="weather")


def _script_weather_run(server, model: str) -> None:
    server.script(
        model,
        [
            Reply("Thought: I need the weather.\nAction: weather\nAction Input: Paris"),
            Reply("Thought: I have it.\nFinal Answer: It is sunny in Paris."),
        ],
    )


@pytest.mark.django_db
def test_admin_paths_never_show_the_secret(
    staff_client, echo_server, scripted_server, scripted_endpoint
):
    tool = _create_weather_tool(staff_client, echo_server)
    profile = AgentProfile.objects.create(
        name="Weather", slug="weather", model_config=scripted_endpoint, max_iterations=3
    )
    profile.tools.set([tool])
    pages: dict[str, str] = {}

    pages["tool list"] = page_text(staff_client.get(reverse("admin:agents_toolconfig_changelist")))
    pages["tool page"] = page_text(
        staff_client.get(reverse("admin:agents_toolconfig_change", args=[tool.pk]))
    )
    pages["test tool"] = page_text(
        staff_client.post(
            reverse("admin:agents_toolconfig_test", args=[tool.pk]), {"sample_input": "Paris"}
        )
    )
    pages["preview"] = page_text(
        staff_client.post(
            reverse("admin:agents_agentprofile_preview", args=[profile.pk]),
            {"question": "Weather in Paris?"},
        )
    )
    _script_weather_run(scripted_server, scripted_endpoint.model)
    pages["try it"] = page_text(
        staff_client.post(
            reverse("admin:agents_agentprofile_try", args=[profile.pk]),
            {"question": "Weather in Paris?"},
        )
    )
    version = profile.versions.order_by("-number").first()
    pages["version"] = page_text(
        staff_client.get(
            reverse("admin:agents_agentprofile_version", args=[profile.pk, version.number])
        )
    )

    # The secret did travel: the endpoint received it, for the test and for the run.
    assert echo_server.seen_authorization == [f"Bearer {SECRET}"] * 2
    # The tool's answer came back, with the echoed secret redacted.
    assert "sunny" in pages["test tool"]
    assert "Bearer [secret]" in pages["test tool"]
    assert "It is sunny in Paris." in pages["try it"]
    assert "Bearer [secret]" in pages["try it"]
    assert "weather" in pages["preview"]
    for name, body in pages.items():
        assert SECRET not in body, name
    requests = scripted_server.requests(scripted_endpoint.model)
    assert len(requests) == 2
    assert "sunny" in json.dumps(requests[1])  # the observation went to the model…
    assert SECRET not in json.dumps(requests)  # …without the secret


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_real_run_stores_and_serves_no_secret(live_stack, echo_server, staff, client):
    client.force_login(staff)
    tool = _create_weather_tool(client, echo_server)
    model = f"admin-secret-{uuid.uuid4().hex[:8]}"
    _script_weather_run(live_stack.model, model)
    profile = live_stack.profile(model, tools=("weather",))
    assert list(profile.tools.all()) == [tool]
    owner = staff
    conversation = conversation_create(owner=owner, profile=profile)

    status, sent = live_stack.http(
        "POST",
        f"/api/conversations/{conversation.pk}/messages/",
        owner,
        body={"content": "Weather in Paris?", "client_id": uuid.uuid4().hex},
    )
    assert status in (200, 201), sent
    run = live_stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)

    assert run.status == AgentRun.Status.SUCCEEDED, run.error_message
    assert echo_server.seen_authorization == [f"Bearer {SECRET}"]
    stored = [
        json.dumps(list(RunEvent.objects.filter(conversation=conversation).values()), default=str),
        json.dumps(list(ModelCall.objects.filter(run=run).values()), default=str),
    ]
    assert "sunny" in stored[0]
    status, served = live_stack.http("GET", f"/api/conversations/{conversation.pk}/", owner)
    assert status == 200
    inspector = page_text(client.get(reverse("admin:agents_agentrun_change", args=[run.pk])))
    assert "Bearer [secret]" in inspector
    for text in [
        *stored,
        json.dumps(served),
        inspector,
        json.dumps(live_stack.model.requests(model)),
    ]:
        assert SECRET not in text
