"""Who may reach an MCP server, and where a server may be.

A stdio server runs a program on this machine: only superusers set up, change or test a
tool of one. Every contact with a server (Discover, enabling) is a POST with the change
permission. HTTP servers' URLs go through ``http_request``'s SSRF guard, whose allow-list of
internal hosts is ``CHAT_MCP_ALLOW_HOSTS`` (the suite allows its loopback servers: see
tests/early_env.py), and a server that gives no session says so in one text whatever the
port held. Loopback only."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Permission
from django.test import Client, override_settings
from django.urls import reverse

from agents.models import McpServer, ToolConfig
from agents.services.mcp import mcp_server_discover, mcp_tools_enable
from agents.tools.base import ToolError
from agents.tools.builtin import http_request
from agents.tools.mcp_client import NO_SESSION, close_sessions
from agents.tools.registry import build_tool
from tests.admin.conftest import page_text
from tests.mcp.conftest import McpHttpServer, _free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def plain_staff(make_user):
    """Staff with every permission on servers and tools, but not a superuser (a client of
    its own: ``staff_client`` is the ``client`` fixture)."""
    user = make_user("operator", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="agents", codename__regex=r"_(mcpserver|toolconfig)$"
        )
    )
    own = Client()
    own.force_login(user)
    return own


def _tool_form(server_id: int, **overrides: str) -> dict[str, str]:
    data = {
        "name": "shell",
        "kind": "mcp",
        "description": "Runs a program.",
        "config": f'{{"server": {server_id}, "tool": "add"}}',
        "secrets": "",
        "enabled": "on",
        "timeout_seconds": "5",
    }
    data.update(overrides)
    return data


def test_only_a_superuser_may_create_change_or_test_a_tool_of_a_stdio_server(
    plain_staff,
    staff_client,
    make_server,
    mcp_stdio,
):
    command, args, calls = mcp_stdio
    stdio = make_server(name="local", transport="stdio", command=command, args=args)

    response = plain_staff.post(reverse("admin:agents_toolconfig_add"), _tool_form(stdio.pk))
    assert response.status_code == 200
    assert "Only a superuser may create or change a tool of a stdio MCP server" in page_text(
        response
    )
    assert not ToolConfig.objects.filter(name="shell").exists()

    # A superuser's tool on that server: staff may neither change nor test it.
    response = staff_client.post(reverse("admin:agents_toolconfig_add"), _tool_form(stdio.pk))
    assert response.status_code == 302, page_text(response)
    tool = ToolConfig.objects.get(name="shell")
    test_url = reverse("admin:agents_toolconfig_test", args=[tool.pk])
    response = plain_staff.post(test_url, {"sample_input": '{"a": 1, "b": 2}'})
    assert response.status_code == 403
    assert not calls.exists() or "add" not in calls.read_text()
    response = plain_staff.post(
        reverse("admin:agents_toolconfig_change", args=[tool.pk]),
        _tool_form(stdio.pk, description="changed"),
    )
    assert response.status_code == 403
    assert ToolConfig.objects.get(pk=tool.pk).description == "Runs a program."
    # Nor point a tool of theirs at it.
    mine = ToolConfig.objects.create(name="calc", kind="calculator", description="Adds.")
    response = plain_staff.post(
        reverse("admin:agents_toolconfig_change", args=[mine.pk]),
        _tool_form(stdio.pk, name="calc"),
    )
    assert response.status_code == 200
    assert ToolConfig.objects.get(pk=mine.pk).kind == "calculator"

    # The superuser may test it.
    response = staff_client.post(test_url, {"sample_input": '{"a": 1, "b": 2}'})
    assert response.status_code == 200
    assert '"tool": "add"' in calls.read_text()


def test_discover_contacts_the_server_only_on_a_post_with_the_change_permission(
    make_user, staff_client, make_server, mcp_stdio
):
    command, args, _ = mcp_stdio
    stdio = make_server(name="local", transport="stdio", command=command, args=args)
    url = reverse("admin:agents_mcpserver_discover", args=[stdio.pk])
    viewer = make_user("viewer", is_staff=True)
    viewer.user_permissions.set(
        Permission.objects.filter(codename__in=["view_mcpserver", "change_mcpserver"])
    )
    client = Client()
    client.force_login(viewer)

    page = page_text(client.get(url))
    assert "needs the permission to change it" in page
    stdio.refresh_from_db()
    assert stdio.last_contact_at is None  # the GET started nothing
    assert client.post(url, {"discover": "1"}).status_code == 403  # stdio: superusers only
    stdio.refresh_from_db()
    assert stdio.last_contact_at is None

    # A superuser's GET shows the button, and contacts nobody either; the POST does.
    page = page_text(staff_client.get(url))
    assert 'name="discover"' in page
    stdio.refresh_from_db()
    assert stdio.last_contact_at is None
    page = page_text(staff_client.post(url, {"discover": "1"}))
    assert 'data-remote="add"' in page
    stdio.refresh_from_db()
    assert stdio.state == McpServer.State.UP


@override_settings(CHAT_MCP_ALLOW_HOSTS=[])
def test_a_server_url_on_an_internal_address_is_refused_before_any_contact(
    mcp_http_server, make_server
):
    server = make_server(url=mcp_http_server.url)
    before = len(mcp_http_server.calls())

    discovery = mcp_server_discover(server=server)

    assert discovery.tools == []
    assert "the server URL is refused: 127.0.0.1 resolves to 127.0.0.1, a loopback" in (
        discovery.error
    )
    assert "CHAT_MCP_ALLOW_HOSTS" in discovery.error
    server.refresh_from_db()
    assert server.state == McpServer.State.DOWN
    assert len(mcp_http_server.calls()) == before


def test_a_tool_of_a_server_whose_url_became_internal_is_not_called(mcp_http_server, make_server):
    server = make_server(url=mcp_http_server.url)
    from agents.services.mcp import mcp_tools_enable

    [remote] = [tool for tool in mcp_server_discover(server=server).tools if tool.name == "add"]
    [row] = mcp_tools_enable(server=server, choices=[(remote, "t_add")], timeout_seconds=5)
    calls = len(mcp_http_server.calls())

    with override_settings(CHAT_MCP_ALLOW_HOSTS=[]):
        tool = build_tool(row, user=None)
        with pytest.raises(ToolError, match="is not called: the server URL is refused"):
            tool.run(a=1, b=2)

    assert len(mcp_http_server.calls()) == calls


@pytest.fixture
def not_mcp_http() -> Iterator[str]:
    """A loopback HTTP server that is not an MCP server."""

    class Plain(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"not found")

        do_GET = do_POST

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def not_http() -> Iterator[str]:
    """A loopback port that accepts and answers something that is not HTTP."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    stop.set()
    thread.join()
    listener.close()


def test_closed_open_and_non_mcp_ports_fail_with_one_text(
    make_server, down_url, not_mcp_http, not_http
):
    errors = []
    for index, url in enumerate([down_url, not_mcp_http, not_http]):
        server = make_server(name=f"probe{index}", url=url, timeout_seconds=3)
        errors.append(mcp_server_discover(server=server).error)
        server.refresh_from_db()
        assert server.last_error == NO_SESSION

    assert errors == [NO_SESSION] * 3


@pytest.fixture
def mcp_server_on_a_second_loopback_address(tmp_path) -> Iterator[McpHttpServer]:
    server = McpHttpServer(
        port=_free_port(), calls_file=tmp_path / "pinned-calls.jsonl", host="127.0.0.2"
    ).start()
    yield server
    close_sessions()
    server.stop()


def test_the_connection_goes_to_the_address_the_guard_checked(
    mcp_server_on_a_second_loopback_address, make_server, monkeypatch
):
    """DNS rebinding: the name's answer at the check is where the session connects.

    The guard is made to see ``localhost`` at 127.0.0.2, where the server listens; the
    system's resolver answers 127.0.0.1 or ::1, where nothing does. Discovery and a call
    reach the server only if the client connects to the checked address, not the name.
    """
    listening = mcp_server_on_a_second_loopback_address
    checked_answer = [ipaddress.ip_address("127.0.0.2")]
    monkeypatch.setattr(http_request, "_resolve", lambda host, port: checked_answer)
    server = make_server(url=f"http://localhost:{listening.port}/mcp")

    with override_settings(CHAT_MCP_ALLOW_HOSTS=["localhost"]):
        discovery = mcp_server_discover(server=server)
        assert discovery.error == ""
        [remote] = [tool for tool in discovery.tools if tool.name == "add"]
        [row] = mcp_tools_enable(server=server, choices=[(remote, "t_add")], timeout_seconds=5)
        assert build_tool(row, user=None).run(a=2, b=3) == "5"

    assert [call["arguments"] for call in listening.calls()] == [{"a": 2, "b": 3}]
