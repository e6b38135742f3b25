"""The MCP server admin: write-only headers, stdio for superusers only, Discover, enabling
tools (renamed on a clash), the state and last error, and Test tool for an MCP tool."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from agents.models import McpServer, ToolConfig
from agents.tools.mcp_client import NO_SESSION
from tests.admin.conftest import page_text
from tests.mcp.conftest import SECRET_TOKEN

pytestmark = pytest.mark.django_db


def _server_form(**overrides):
    data = {
        "name": "tools",
        "transport": "http",
        "url": "",
        "headers": "",
        "command": "",
        "args": "[]",
        "timeout_seconds": "5",
    }
    data.update(overrides)
    return data


@pytest.fixture
def plain_staff(make_user, client):
    """Staff with every permission on servers and tools, but not a superuser."""
    user = make_user("operator", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="agents", codename__regex=r"_(mcpserver|toolconfig)$"
        )
    )
    client.force_login(user)
    return client


def test_a_server_with_a_secret_header_is_added_and_the_header_never_shown(
    staff_client, mcp_http_server
):
    response = staff_client.post(
        reverse("admin:agents_mcpserver_add"),
        _server_form(url=mcp_http_server.url, headers=f"Authorization: Bearer {SECRET_TOKEN}"),
    )
    assert response.status_code == 302, page_text(response)
    server = McpServer.objects.get(name="tools")
    assert server.get_headers() == {"Authorization": f"Bearer {SECRET_TOKEN}"}

    page = page_text(staff_client.get(reverse("admin:agents_mcpserver_change", args=[server.pk])))
    assert "Stored headers: Authorization" in page
    assert SECRET_TOKEN not in page
    listing = page_text(staff_client.get(reverse("admin:agents_mcpserver_changelist")))
    assert SECRET_TOKEN not in listing

    # Saving again with the box empty keeps the header.
    response = staff_client.post(
        reverse("admin:agents_mcpserver_change", args=[server.pk]),
        _server_form(url=mcp_http_server.url, timeout_seconds="7"),
    )
    assert response.status_code == 302, page_text(response)
    assert McpServer.objects.get(pk=server.pk).get_headers() == {
        "Authorization": f"Bearer {SECRET_TOKEN}"
    }


def test_discover_lists_the_tools_and_enables_the_chosen_ones_renamed_on_a_clash(
    staff_client, mcp_http_server, make_server
):
    server = make_server(url=mcp_http_server.url, headers={"Authorization": SECRET_TOKEN})
    ToolConfig.objects.create(name="add", kind="calculator", description="Another add.")
    url = reverse("admin:agents_mcpserver_discover", args=[server.pk])

    page = page_text(staff_client.post(url, {"discover": "1"}))

    assert 'data-remote="add"' in page
    assert 'data-remote="send_mail"' in page
    assert "Adds two whole numbers." in page
    assert "&quot;integer&quot;" in page  # the input schema is shown
    assert "readOnlyHint" in page
    assert 'value="add_2"' in page  # "add" is taken: a free name is suggested
    assert SECRET_TOKEN not in page

    rows = ["add", "send_mail", "forecast", "refuse", "hang", "whoami", "token_status"]
    data = {"timeout_seconds": "4"}
    for index, name in enumerate(rows):
        data[f"name_{index}"] = {"add": "add", "send_mail": "mail_send"}.get(name, name)
    data["enable_0"] = "on"  # add, under the clashing name
    data["enable_1"] = "on"
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "A tool named add exists: choose another." in page_text(response)
    assert not ToolConfig.objects.filter(kind="mcp").exists()

    data["name_0"] = "remote_add"
    response = staff_client.post(url, data)
    assert response.status_code == 302, page_text(response)
    made = {row.name: row for row in ToolConfig.objects.filter(kind="mcp")}
    assert set(made) == {"remote_add", "mail_send"}
    assert made["remote_add"].config["tool"] == "add"
    assert made["remote_add"].config["server"] == server.pk
    assert made["remote_add"].timeout_seconds == 4
    assert made["mail_send"].config["annotations"]["destructiveHint"] is True
    assert (made["mail_send"].needs_approval, made["remote_add"].needs_approval) == (True, False)
    # What the server marks read-only a replay may run (agents/react/replay.py).
    assert (made["mail_send"].read_only, made["remote_add"].read_only) == (False, True)
    assert made["mail_send"].description == "Sends an email."

    # Tools already enabled are shown as such, not offered again.
    page = page_text(staff_client.post(url, {"discover": "1"}))
    assert 'value="remote_add"' in page
    server.refresh_from_db()
    assert server.state == McpServer.State.UP


def test_discover_on_a_server_that_is_down_shows_the_error_and_the_state(
    staff_client, make_server, down_url
):
    server = make_server(url=down_url, timeout_seconds=3)

    url = reverse("admin:agents_mcpserver_discover", args=[server.pk])
    page = page_text(staff_client.post(url, {"discover": "1"}))

    assert f"The server did not answer: {NO_SESSION}" in page
    assert 'id="server-state" class="chatsite-failed">Down<' in page
    change = page_text(staff_client.get(reverse("admin:agents_mcpserver_change", args=[server.pk])))
    assert NO_SESSION in change  # the last error, on the server's page
    listing = page_text(staff_client.get(reverse("admin:agents_mcpserver_changelist")))
    assert "Down" in listing


def test_only_a_superuser_may_create_a_stdio_server(plain_staff, staff, client, mcp_stdio):
    command, args, _ = mcp_stdio
    form = _server_form(transport="stdio", command=command, args=json.dumps(args))

    response = plain_staff.post(reverse("admin:agents_mcpserver_add"), form)
    assert response.status_code == 200
    assert "Only a superuser may create or change a stdio server" in page_text(response)
    assert not McpServer.objects.exists()

    client.force_login(staff)
    response = client.post(reverse("admin:agents_mcpserver_add"), form)
    assert response.status_code == 302, page_text(response)
    assert McpServer.objects.get().transport == "stdio"


def test_a_stdio_servers_secrets_go_in_write_only_environment_variables(
    staff_client, mcp_stdio, make_user
):
    command, args, _ = mcp_stdio
    secret = "env-secret-77b1e0"
    add = reverse("admin:agents_mcpserver_add")
    form = _server_form(transport="stdio", command=command, args=json.dumps(args))

    # A malformed line is named, never echoed.
    response = staff_client.post(add, {**form, "environment": f"SERVICE TOKEN {secret}"})
    assert "Line 1 is not NAME=value." in page_text(response)
    assert secret not in page_text(response)
    assert not McpServer.objects.exists()

    response = staff_client.post(add, {**form, "environment": f"SERVICE_TOKEN={secret}"})
    assert response.status_code == 302, page_text(response)
    server = McpServer.objects.get()
    assert server.get_environment() == {"SERVICE_TOKEN": secret}
    change = reverse("admin:agents_mcpserver_change", args=[server.pk])
    page = page_text(staff_client.get(change))
    assert "Stored variables: SERVICE_TOKEN" in page
    assert secret not in page

    # Staff who may only view servers see the names, never the value.
    viewer = make_user("viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_mcpserver"))
    viewer_client = Client()
    viewer_client.force_login(viewer)
    assert secret not in page_text(viewer_client.get(change))

    # Saving with the box empty keeps it; NAME= removes it.
    assert staff_client.post(change, form).status_code == 302
    assert McpServer.objects.get().get_environment() == {"SERVICE_TOKEN": secret}
    assert staff_client.post(change, {**form, "environment": "SERVICE_TOKEN="}).status_code == 302
    assert McpServer.objects.get().get_environment() == {}


def test_environment_variables_are_refused_for_an_http_server(staff_client, mcp_http_server):
    response = staff_client.post(
        reverse("admin:agents_mcpserver_add"),
        _server_form(url=mcp_http_server.url, environment="SERVICE_TOKEN=x"),
    )
    assert "Environment variables are for stdio servers only." in page_text(response)
    assert not McpServer.objects.exists()


def test_staff_cannot_change_a_stdio_server_or_turn_a_server_into_one(
    plain_staff, make_server, mcp_http_server
):
    stdio = make_server(name="local", transport="stdio", command="/bin/true")
    change = reverse("admin:agents_mcpserver_change", args=[stdio.pk])

    response = plain_staff.post(
        change, _server_form(name="local", transport="stdio", command="/bin/sh")
    )
    assert response.status_code == 403
    assert McpServer.objects.get(pk=stdio.pk).command == "/bin/true"
    assert (
        plain_staff.post(
            reverse("admin:agents_mcpserver_delete", args=[stdio.pk]), {"post": "yes"}
        ).status_code
        == 403
    )

    http = make_server(name="remote", url=mcp_http_server.url)
    response = plain_staff.post(
        reverse("admin:agents_mcpserver_change", args=[http.pk]),
        _server_form(name="remote", transport="stdio", command="/bin/sh"),
    )
    assert response.status_code == 200
    assert "Only a superuser may create or change a stdio server" in page_text(response)
    assert McpServer.objects.get(pk=http.pk).transport == "http"

    # An HTTP server is theirs to edit.
    response = plain_staff.post(
        reverse("admin:agents_mcpserver_change", args=[http.pk]),
        _server_form(name="remote", url=mcp_http_server.url, timeout_seconds="9"),
    )
    assert response.status_code == 302, page_text(response)


def test_test_tool_page_runs_an_mcp_tool(staff_client, mcp_http_server, make_server):
    server = make_server(url=mcp_http_server.url, headers={"Authorization": SECRET_TOKEN})
    staff_client.post(
        reverse("admin:agents_mcpserver_discover", args=[server.pk]),
        {"timeout_seconds": "5", "enable_5": "on", "name_5": "who", "name_0": "add"},
    )
    tool = ToolConfig.objects.get(name="who")

    response = staff_client.post(
        reverse("admin:agents_toolconfig_test", args=[tool.pk]), {"sample_input": "{}"}
    )

    page = page_text(response)
    assert "you sent: [secret]" in page
    assert SECRET_TOKEN not in page
    assert mcp_http_server.calls()[-1]["authorization"] == SECRET_TOKEN
