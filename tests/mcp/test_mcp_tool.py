"""The mcp tool kind against real MCP servers (the SDK's MCPServer) over both transports."""

from __future__ import annotations

import json

import pytest

from agents.models import McpServer, ToolConfig
from agents.react.tools import ToolInputError
from agents.redaction import redact
from agents.selectors import tool_secret_values
from agents.services.mcp import mcp_server_discover, mcp_tools_enable
from agents.services.tools import tool_config_run_once, tool_config_secret_values
from agents.tools.base import REDACTED, ToolError
from agents.tools.mcp_client import NO_SESSION, needs_approval_by_default
from agents.tools.registry import build_tool
from tests.mcp.conftest import SECRET_TOKEN

pytestmark = pytest.mark.django_db


def _enable(server, *names, timeout=5.0):
    discovery = mcp_server_discover(server=server)
    assert discovery.error == ""
    by_name = {tool.name: tool for tool in discovery.tools}
    return {
        row.config["tool"]: row
        for row in mcp_tools_enable(
            server=server,
            choices=[(by_name[name], f"t_{name}") for name in names],
            timeout_seconds=timeout,
        )
    }


def test_discovery_over_http_lists_tools_with_schemas_and_records_the_state(
    mcp_http_server, make_server
):
    server = make_server(url=mcp_http_server.url)

    discovery = mcp_server_discover(server=server)

    assert discovery.error == ""
    tools = {tool.name: tool for tool in discovery.tools}
    assert set(tools) == {
        "add",
        "send_mail",
        "forecast",
        "refuse",
        "hang",
        "whoami",
        "token_status",
        "environment_value",
    }
    assert tools["add"].description == "Adds two whole numbers."
    assert tools["add"].input_schema["properties"]["a"]["type"] == "integer"
    assert tools["add"].input_schema["required"] == ["a", "b"]
    server.refresh_from_db()
    assert server.state == McpServer.State.UP
    assert server.last_error == ""
    assert [tool["name"] for tool in server.discovered_tools] == [t.name for t in discovery.tools]


def test_annotations_are_kept_on_each_tool_and_say_which_need_approval(
    mcp_http_server, make_server
):
    server = make_server(url=mcp_http_server.url)
    enabled = _enable(server, "add", "send_mail", "refuse")

    annotations = {name: row.config["annotations"] for name, row in enabled.items()}
    assert annotations["add"] == {"readOnlyHint": True}
    assert annotations["send_mail"] == {"readOnlyHint": False, "destructiveHint": True}
    assert annotations["refuse"] == {}
    assert needs_approval_by_default(annotations["add"]) is False
    assert needs_approval_by_default(annotations["send_mail"]) is True
    # No hint at all: not read-only as far as anyone knows.
    assert needs_approval_by_default(annotations["refuse"]) is True
    assert needs_approval_by_default({"readOnlyHint": True, "destructiveHint": True}) is True
    # Enabling the tools made exactly those wait for approval (staff may change it later).
    assert {name: row.needs_approval for name, row in enabled.items()} == {
        "add": False,
        "send_mail": True,
        "refuse": True,
    }


def test_a_call_over_http_returns_the_text_and_reuses_the_session(mcp_http_server, make_server):
    server = make_server(url=mcp_http_server.url)
    row = _enable(server, "add")["add"]
    tool = build_tool(row, user=None)

    assert tool.run(**tool.coerce_input({"a": 2, "b": 40})) == "42"
    assert build_tool(row, user=None).run(**tool.coerce_input('{"a": 1, "b": 1}')) == "2"
    calls = mcp_http_server.calls()
    assert [call["arguments"] for call in calls] == [{"a": 2, "b": 40}, {"a": 1, "b": 1}]
    # One session for both calls, even from two tool instances (as two runs would make).
    assert calls[0]["session"]
    assert calls[1]["session"] == calls[0]["session"]


def test_a_call_over_stdio_runs_the_program_and_answers(mcp_stdio, make_server):
    command, args, calls = mcp_stdio
    server = make_server(transport=McpServer.Transport.STDIO, command=command, args=args)
    row = _enable(server, "add")["add"]

    tool = build_tool(row, user=None)

    assert tool.run(a=20, b=22) == "42"
    assert json.loads(calls.read_text().splitlines()[-1])["arguments"] == {"a": 20, "b": 22}


def test_a_stdio_program_gets_its_environment_and_its_output_never_shows_it(mcp_stdio, make_server):
    command, args, calls = mcp_stdio
    secret = "env-secret-4d2c9f"
    server = make_server(
        transport=McpServer.Transport.STDIO,
        command=command,
        args=args,
        environment={"SERVICE_TOKEN": secret},
    )
    tool = build_tool(_enable(server, "environment_value")["environment_value"], user=None)

    output = tool.run(name="SERVICE_TOKEN")

    # The program had it (what it wrote down), and what it echoed back is redacted.
    assert json.loads(calls.read_text().splitlines()[-1])["arguments"]["value"] == secret
    assert output.startswith("SERVICE_TOKEN is ")
    assert secret not in output
    assert secret in tool_secret_values()  # pages shown to others blank it too
    assert secret not in json.dumps(McpServer.objects.values().get(pk=server.pk), default=str)


def test_structured_results_become_text(mcp_http_server, make_server):
    server = make_server(url=mcp_http_server.url)
    tool = build_tool(_enable(server, "forecast")["forecast"], user=None)

    output = tool.run(city="Lyon")

    assert json.loads(output) == {"city": "Lyon", "celsius": 21.5}


def test_a_tool_error_from_the_server_is_an_error_observation(mcp_http_server, make_server):
    server = make_server(url=mcp_http_server.url)
    tool = build_tool(_enable(server, "refuse")["refuse"], user=None)

    with pytest.raises(ToolError, match=r"refuse on tests reported an error: .*refused: no stock"):
        tool.run(reason="no stock")
    server.refresh_from_db()
    assert server.state == McpServer.State.UP  # the server answered; the tool failed


def test_arguments_that_do_not_fit_the_schema_are_refused_before_any_call(
    mcp_http_server, make_server
):
    server = make_server(url=mcp_http_server.url)
    tool = build_tool(_enable(server, "add")["add"], user=None)

    with pytest.raises(ToolInputError, match="'two' is not of type 'integer'"):
        tool.coerce_input({"a": "two", "b": 2})
    with pytest.raises(ToolInputError, match="'b' is a required property"):
        tool.coerce_input({"a": 2})
    assert mcp_http_server.calls() == []


def test_a_server_that_hangs_past_the_timeout_gives_a_clear_error(mcp_http_server, make_server):
    server = make_server(url=mcp_http_server.url)
    tool = build_tool(_enable(server, "hang", "add", timeout=1.0)["hang"], user=None)

    with pytest.raises(ToolError, match="did not answer: no answer within 1 s"):
        tool.run()
    server.refresh_from_db()
    assert server.state == McpServer.State.DOWN
    assert "no answer within 1 s" in server.last_error
    # The next call opens a new session and works: one slow call does not break the tool.
    adder = build_tool(ToolConfig.objects.get(name="t_add"), user=None)
    assert adder.run(a=1, b=2) == "3"
    server.refresh_from_db()
    assert server.state == McpServer.State.UP
    hung, added = mcp_http_server.calls()
    assert added["session"] != hung["session"]  # the session that timed out was closed


def test_a_server_that_is_down_gives_its_tools_a_clear_error(mcp_http_server, make_server):
    server = make_server(url=mcp_http_server.url)
    tool = build_tool(_enable(server, "add")["add"], user=None)
    assert tool.run(a=1, b=1) == "2"

    mcp_http_server.stop()

    with pytest.raises(ToolError, match=r"the MCP server tests did not answer: .*unavailable"):
        tool.run(a=1, b=1)
    server.refresh_from_db()
    assert server.state == McpServer.State.DOWN
    assert server.last_error


def test_discovering_a_server_that_is_down_records_why(down_url, make_server):
    server = make_server(url=down_url, timeout_seconds=3)

    discovery = mcp_server_discover(server=server)

    assert discovery.tools == []
    assert discovery.error == NO_SESSION
    server.refresh_from_db()
    assert server.state == McpServer.State.DOWN
    assert server.last_error == NO_SESSION


def test_header_values_reach_the_server_but_are_redacted_from_results(mcp_http_server, make_server):
    server = make_server(
        url=mcp_http_server.url, headers={"Authorization": f"Bearer {SECRET_TOKEN}"}
    )
    row = _enable(server, "whoami")["whoami"]

    output = build_tool(row, user=None).run()

    assert mcp_http_server.calls()[-1]["authorization"] == f"Bearer {SECRET_TOKEN}"
    assert SECRET_TOKEN not in output
    assert output == f"you sent: {REDACTED}"
    assert SECRET_TOKEN not in json.dumps(row.config)
    assert SECRET_TOKEN not in McpServer.objects.get(pk=server.pk).headers_encrypted
    # Pages that show this tool's output redact the server's headers too.
    assert f"Bearer {SECRET_TOKEN}" in tool_config_secret_values([row])


def test_a_token_the_server_quotes_without_its_scheme_is_redacted(mcp_http_server, make_server):
    server = make_server(
        url=mcp_http_server.url, headers={"Authorization": f"Bearer {SECRET_TOKEN}"}
    )
    row = _enable(server, "token_status")["token_status"]

    with pytest.raises(ToolError) as raised:
        build_tool(row, user=None).run()

    assert f"token {REDACTED} is expired" in str(raised.value)
    assert SECRET_TOKEN not in str(raised.value)
    # A shared page blanks what slipped into a step with every tool secret: MCP headers too.
    assert f"Bearer {SECRET_TOKEN}" in tool_secret_values()
    assert SECRET_TOKEN not in redact(f"token {SECRET_TOKEN} is expired", tool_secret_values())


def test_test_tool_works_for_mcp_tools(mcp_http_server, make_server):
    server = make_server(url=mcp_http_server.url)
    row = _enable(server, "add")["add"]

    result = tool_config_run_once(tool_config=row, tool_input={"a": 3, "b": 4}, user=None)

    assert result.ok is True
    assert result.output == "7"


def test_a_tool_whose_server_was_deleted_says_so(mcp_http_server, make_server):
    server = make_server(url=mcp_http_server.url)
    row = _enable(server, "add")["add"]
    server.delete()

    with pytest.raises(ToolError, match="the MCP server of t_add no longer exists"):
        build_tool(row, user=None).run(a=1, b=2)
