"""Chat runs through a real worker that call MCP and OpenAPI tools on servers the test runs.

The worker and daphne processes are the session's (``live_stack``); the MCP server is a
separate process built with the SDK, the API a loopback HTTP server. A secret header of the
MCP server reaches it, and never any prompt, event, API answer, page or log.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.urls import reverse

from agents.llm.scripted import Reply
from agents.models import AgentRun, McpServer, Message, ModelCall, RunEvent, ToolConfig
from agents.services.conversations import conversation_create
from agents.services.mcp import mcp_server_discover, mcp_tools_enable
from tests.admin.conftest import page_text
from tests.mcp.conftest import SECRET_TOKEN, pet_api_document

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _ask(live_stack, owner, profile, question: str) -> AgentRun:
    conversation = conversation_create(owner=owner, profile=profile)
    status, body = live_stack.http(
        "POST",
        f"/api/conversations/{conversation.pk}/messages/",
        owner,
        body={"content": question, "client_id": uuid.uuid4().hex},
    )
    assert status in (200, 201), body
    return live_stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)


def _observations(run: AgentRun) -> list[dict]:
    return [
        event.payload
        for event in RunEvent.objects.filter(run=run).order_by("seq")
        if event.payload.get("kind") == "observation"
    ]


def _enable(server: McpServer, *remote_names: str, timeout: float = 10) -> None:
    discovery = mcp_server_discover(server=server)
    assert discovery.error == ""
    by_name = {tool.name: tool for tool in discovery.tools}
    enabled = mcp_tools_enable(
        server=server,
        choices=[(by_name[name], f"mcp_{name}") for name in remote_names],
        timeout_seconds=timeout,
    )
    # Tools without a read-only hint wait for approval by default; these runs are about the
    # calls themselves (approval has its own tests in tests/e2e/test_approval.py).
    ToolConfig.objects.filter(pk__in=[row.pk for row in enabled]).update(needs_approval=False)


def test_a_chat_run_calls_an_mcp_tool_and_no_secret_leaks(
    live_stack, mcp_http_server, make_server, staff, client
):
    server = make_server(
        url=mcp_http_server.url, headers={"Authorization": f"Bearer {SECRET_TOKEN}"}
    )
    _enable(server, "add", "whoami")
    model = f"mcp-live-{uuid.uuid4().hex[:8]}"
    profile = live_stack.profile(model, tools=("mcp_add", "mcp_whoami"))
    live_stack.model.script(
        model,
        [
            Reply('Thought: Add them.\nAction: mcp_add\nAction Input: {"a": 19, "b": 23}'),
            Reply("Thought: And who am I?\nAction: mcp_whoami\nAction Input: {}"),
            Reply("Thought: Done.\nFinal Answer: 19 + 23 = 42."),
        ],
    )

    run = _ask(live_stack, staff, profile, "What is 19 + 23?")

    assert run.status == AgentRun.Status.SUCCEEDED, run.error_message
    calls = mcp_http_server.calls()
    assert [(call["tool"], call["arguments"]) for call in calls] == [
        ("add", {"a": 19, "b": 23}),
        ("whoami", {}),
    ]
    assert {call["authorization"] for call in calls} == {f"Bearer {SECRET_TOKEN}"}
    observations = _observations(run)
    assert [o["text"] for o in observations] == ["42", "you sent: [secret]"]
    requests = live_stack.model.requests(model)
    assert "mcp_add" in json.dumps(requests[0]["messages"])  # the model was told of the tool
    answer = Message.objects.get(conversation=run.conversation, role=Message.Role.ASSISTANT)
    assert answer.content == "19 + 23 = 42."

    client.force_login(staff)
    status, served = live_stack.http("GET", f"/api/conversations/{run.conversation_id}/", staff)
    assert status == 200
    texts = {
        "prompts": json.dumps(requests),
        "events": json.dumps(list(RunEvent.objects.filter(run=run).values()), default=str),
        "model calls": json.dumps(list(ModelCall.objects.filter(run=run).values()), default=str),
        "api": json.dumps(served),
        "inspector": page_text(client.get(reverse("admin:agents_agentrun_change", args=[run.pk]))),
        "server page": page_text(
            client.get(reverse("admin:agents_mcpserver_change", args=[server.pk]))
        ),
        "tool page": page_text(
            client.get(
                reverse(
                    "admin:agents_toolconfig_change",
                    args=[ToolConfig.objects.get(name="mcp_whoami").pk],
                )
            )
        ),
        "worker log": live_stack.worker.log_text(),
        "daphne log": live_stack.daphne.log_text(),
    }
    assert "you sent: [secret]" in texts["inspector"]
    for where, text in texts.items():
        assert SECRET_TOKEN not in text, where


def test_errors_timeouts_and_a_down_server_become_error_observations(
    live_stack, mcp_http_server, make_server, staff
):
    server = make_server(url=mcp_http_server.url)
    _enable(server, "refuse", timeout=10)
    _enable(server, "hang", timeout=1)
    model = f"mcp-fail-{uuid.uuid4().hex[:8]}"
    profile = live_stack.profile(model, tools=("mcp_refuse", "mcp_hang"))
    live_stack.model.script(
        model,
        [
            Reply('Thought: Try.\nAction: mcp_refuse\nAction Input: {"reason": "closed"}'),
            Reply("Thought: Try the other.\nAction: mcp_hang\nAction Input: {}"),
            Reply("Thought: Neither works.\nFinal Answer: The tools failed."),
        ],
    )

    run = _ask(live_stack, staff, profile, "Try the tools.")

    assert run.status == AgentRun.Status.SUCCEEDED, run.error_message
    refused, hung = _observations(run)
    assert refused["is_error"] is True
    assert "refuse on tests reported an error" in refused["text"]
    assert "refused: closed" in refused["text"]
    assert hung["is_error"] is True
    assert "mcp_hang" in hung["text"]
    assert [call["tool"] for call in mcp_http_server.calls()] == ["refuse", "hang"]

    # Now the server goes away: its tool answers with a clear error, and the admin knows.
    mcp_http_server.stop()
    live_stack.model.script(
        model,
        [
            Reply('Thought: Again.\nAction: mcp_refuse\nAction Input: {"reason": "x"}'),
            Reply("Thought: It is down.\nFinal Answer: The tool is unavailable."),
        ],
    )
    run = _ask(live_stack, staff, profile, "Once more.")

    assert run.status == AgentRun.Status.SUCCEEDED, run.error_message
    (down,) = _observations(run)
    assert down["is_error"] is True
    assert "the MCP server tests did not answer" in down["text"]
    assert "unavailable right now" in down["text"]
    server.refresh_from_db()
    assert server.state == McpServer.State.DOWN
    assert server.last_error


def test_a_chat_run_uses_imported_openapi_tools_against_a_local_api(
    live_stack, pet_api, staff, client
):
    client.force_login(staff)
    port = pet_api.server_address[1]
    base = {
        "document": json.dumps(pet_api_document()),
        "server_url": f"http://127.0.0.1:{port}/v1",
        "allow_hosts": f"127.0.0.1:{port}",
        "timeout_seconds": "10",
    }
    response = client.post(
        reverse("admin:agents_toolconfig_import_openapi"),
        {
            **base,
            "step": "operations",
            **{
                f"opname_{i}": name
                for i, name in enumerate(["list_pets", "add_pet", "get_pet", "x"])
            },
            "op_0": "on",
            "op_1": "on",
            "op_2": "on",
            "secret_AUTH_QUERYKEY": "q-key-1b2c3d4e5f",
            "secret_AUTH_HEADERKEY": "h-key-6a7b8c9d0e",
            "secret_AUTH_BEARER": "bearer-1122334455",
        },
    )
    assert response.status_code == 302, page_text(response)
    model = f"openapi-live-{uuid.uuid4().hex[:8]}"
    profile = live_stack.profile(model, tools=("list_pets", "add_pet", "get_pet"))
    live_stack.model.script(
        model,
        [
            Reply('Thought: Add it.\nAction: add_pet\nAction Input: {"body": {"name": "Tom"}}'),
            Reply('Thought: Look one up.\nAction: get_pet\nAction Input: {"petId": "7"}'),
            Reply('Thought: List.\nAction: list_pets\nAction Input: {"limit": 2}'),
            Reply("Thought: Done.\nFinal Answer: Tom is added; pet 7 is Rex."),
        ],
    )

    run = _ask(live_stack, staff, profile, "Add Tom, then tell me about pet 7.")

    assert run.status == AgentRun.Status.SUCCEEDED, run.error_message
    created, fetched, listed = pet_api.received
    assert (created["method"], created["path"], created["body"]) == (
        "POST",
        "/v1/pets",
        {"name": "Tom"},
    )
    assert created["headers"]["authorization"] == "Bearer bearer-1122334455"
    assert (fetched["path"], fetched["headers"]["x-api-key"]) == ("/v1/pets/7", "h-key-6a7b8c9d0e")
    assert listed["query"] == {"limit": "2", "api_key": "q-key-1b2c3d4e5f"}
    texts = [o["text"] for o in _observations(run)]
    assert '"created": {"name": "Tom"}' in texts[0]
    assert '"name": "Rex"' in texts[1]
    prompts = json.dumps(live_stack.model.requests(model))
    for secret in ("q-key-1b2c3d4e5f", "h-key-6a7b8c9d0e", "bearer-1122334455"):
        assert secret not in prompts
