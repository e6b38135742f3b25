"""MCP servers: their write-only headers, discovery, their state, and enabling their tools."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from agents.crypto import SecretUnreadable, write_only_values_merged
from agents.models import McpServer, ToolConfig
from agents.redaction import redact
from agents.tools.mcp_client import (
    McpUnavailable,
    RemoteTool,
    endpoint_for,
    list_tools,
    needs_approval_by_default,
    server_url_refusal,
)


def mcp_server_headers_update(
    *, server: McpServer, entered: Mapping[str, str], clear_all: bool = False
) -> None:
    """Apply the headers staff typed (write-only, like tool secrets); the caller saves.

    ``entered`` maps header names to values, an empty value removing that header; the
    others are kept unless ``clear_all`` drops them all first.
    """
    if clear_all or entered:
        server.set_headers(
            _write_only_merged(server.get_headers, entered=entered, clear_all=clear_all)
        )


def mcp_server_environment_update(
    *, server: McpServer, entered: Mapping[str, str], clear_all: bool = False
) -> None:
    """Apply the environment variables staff typed for a stdio server, as headers are."""
    if clear_all or entered:
        server.set_environment(
            _write_only_merged(server.get_environment, entered=entered, clear_all=clear_all)
        )


def _write_only_merged(
    stored: Callable[[], dict[str, str]], *, entered: Mapping[str, str], clear_all: bool
) -> dict[str, str]:
    try:
        current = {} if clear_all else stored()
    except SecretUnreadable:
        current = {}  # written under another SECRET_KEY: what is entered now replaces them
    return write_only_values_merged(current=current, entered=entered)


@dataclass(frozen=True)
class Discovery:
    tools: list[RemoteTool]
    error: str  # empty when the server answered


def mcp_server_discover(*, server: McpServer) -> Discovery:
    """Ask ``server`` for its tools; remember them and the server's state either way."""
    try:
        endpoint = endpoint_for(server)
    except SecretUnreadable:
        error = (
            "the stored headers or environment are unreadable (SECRET_KEY changed); "
            "enter them again"
        )
        mcp_server_record_contact(server_id=server.pk, error=error)
        return Discovery(tools=[], error=error)
    refusal = server_url_refusal(endpoint.url) if endpoint.transport != "stdio" else ""
    if refusal:
        mcp_server_record_contact(server_id=server.pk, error=refusal)
        return Discovery(tools=[], error=refusal)
    try:
        tools = list_tools(endpoint)
    except McpUnavailable as exc:
        error = redact(str(exc), endpoint.secret_values())
        mcp_server_record_contact(server_id=server.pk, error=error)
        return Discovery(tools=[], error=error)
    McpServer.objects.filter(pk=server.pk).update(
        discovered_tools=[
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.input_schema,
                "annotations": tool.annotations,
            }
            for tool in tools
        ]
    )
    mcp_server_record_contact(server_id=server.pk, error="")
    return Discovery(tools=tools, error="")


def mcp_server_record_contact(*, server_id: int, error: str) -> None:
    """The outcome of the latest contact: up, or down with the (redacted) reason."""
    state = McpServer.State.DOWN if error else McpServer.State.UP
    # No ``save()``: it would bump updated_at, which names the session of these settings.
    McpServer.objects.filter(pk=server_id).update(
        state=state, last_error=error[:2000], last_contact_at=timezone.now()
    )


def mcp_tools_enable(
    *, server: McpServer, choices: Iterable[tuple[RemoteTool, str]], timeout_seconds: float
) -> list[ToolConfig]:
    """One ``mcp`` tool per (remote tool, local name); names must be free (the form checks)."""
    created: list[ToolConfig] = []
    with transaction.atomic():
        for remote, local_name in choices:
            tool_config = ToolConfig(
                name=local_name,
                kind="mcp",
                description=remote.description or f"{remote.name} on {server.name}",
                config={
                    "server": server.pk,
                    "tool": remote.name,
                    "input_schema": remote.input_schema,
                    "annotations": remote.annotations,
                },
                timeout_seconds=timeout_seconds,
                # A tool the server says may change something waits for the user's approval
                # (staff can untick it in the tool's admin page).
                needs_approval=needs_approval_by_default(remote.annotations),
                # What the server says only reads may be run by a replay (agents/react/replay.py).
                read_only=remote.annotations.get("readOnlyHint") is True,
            )
            tool_config.full_clean()
            tool_config.save()
            created.append(tool_config)
    return created


def mcp_server_tools(*, server: McpServer) -> dict[str, str]:
    """Remote tool name -> local tool name, for the tools already enabled from ``server``."""
    return {
        str(row.config.get("tool")): row.name
        for row in ToolConfig.objects.filter(kind="mcp", config__server=server.pk)
    }
