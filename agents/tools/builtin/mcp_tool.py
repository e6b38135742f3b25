"""``mcp``: one tool of an MCP server (``McpServer``), enabled from the server's Discover page.

The config names the server and the remote tool, and keeps the input schema and the
annotations the server gave at discovery: the schema is what the model sees, the
annotations (``readOnlyHint``, ``destructiveHint``) are what an approval step defaults from
(``mcp_client.needs_approval_by_default``). The server's header values are secrets of this
tool: they are redacted from everything it returns or raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agents.react.tools import JsonDict
from agents.tools.arguments import checked_arguments, object_schema
from agents.tools.base import ConfiguredTool, ToolError
from agents.tools.mcp_client import (
    McpEndpoint,
    McpUnavailable,
    call_tool,
    endpoint_for,
    server_url_refusal,
)

# A result this long is cut before redaction; the engine cuts observations much shorter.
MAX_RESULT_CHARS = 200_000

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server": {"type": "integer", "minimum": 1},
        "tool": {"type": "string", "minLength": 1, "maxLength": 200},
        "input_schema": {"type": "object", "default": {"type": "object", "properties": {}}},
        "annotations": {"type": "object", "default": {}},
    },
    "required": ["server", "tool"],
    "additionalProperties": False,
}


def runs_program(config: Mapping[str, Any]) -> bool:
    """Whether an ``mcp`` tool with this config calls a stdio server, which runs a program
    on the worker's machine (only superusers may set up, change or test such a tool)."""
    from agents.models import McpServer

    server_id = config.get("server") if isinstance(config, Mapping) else None
    if not isinstance(server_id, int) or isinstance(server_id, bool):
        return False
    return McpServer.objects.filter(pk=server_id, transport=McpServer.Transport.STDIO).exists()


class McpTool(ConfiguredTool):
    """Calls a tool on an MCP server (enable it from the server's Discover page)."""

    name = "mcp_tool"
    description = "A tool on an MCP server."
    # The server row is read when the tool is built and its state written after a call.
    uses_database = True

    def __init__(self, **kwargs: Any) -> None:
        from agents.crypto import SecretUnreadable
        from agents.models import McpServer

        config = kwargs.get("config") or {}
        self._server_id = int(config.get("server", 0))
        server = McpServer.objects.filter(pk=self._server_id).first()
        self._server_name = server.name if server else f"#{self._server_id}"
        self._endpoint: McpEndpoint | None = None
        self._secrets_unreadable = False
        header_secrets: dict[str, str] = {}
        if server is not None:
            try:
                self._endpoint = endpoint_for(server)
                header_secrets = {
                    f"MCP_SECRET_{index}": value
                    for index, value in enumerate(self._endpoint.secret_values())
                }
            except SecretUnreadable:
                self._secrets_unreadable = True
        kwargs["secrets"] = {**(kwargs.get("secrets") or {}), **header_secrets}
        super().__init__(**kwargs)

    @classmethod
    def linked_secret_values(cls, config: Mapping[str, Any]) -> list[str]:
        """The server's header and environment values: what pages showing this tool's
        output redact."""
        from agents.crypto import SecretUnreadable
        from agents.models import McpServer

        server = McpServer.objects.filter(pk=config.get("server") or 0).first()
        try:
            return server.secret_values() if server else []
        except SecretUnreadable:
            return []

    def args_schema(self) -> JsonDict:  # type: ignore[override]
        return object_schema(self.config.get("input_schema"))

    def coerce_input(self, tool_input: str | JsonDict) -> JsonDict:
        return checked_arguments(self.name, tool_input, self.args_schema())

    def run(self, **arguments: Any) -> str:
        if self._endpoint is None:
            if self._secrets_unreadable:
                raise ToolError(
                    f"the secrets of MCP server {self._server_name} are unreadable; "
                    "an administrator must enter them again"
                )
            raise ToolError(f"the MCP server of {self.name} no longer exists")
        remote = self.config["tool"]
        refusal = server_url_refusal(self._endpoint.url) if self._endpoint.url else ""
        if self._endpoint.transport != "stdio" and refusal:
            self._record_contact(error=refusal)
            raise ToolError(f"the MCP server {self._server_name} is not called: {refusal}")
        try:
            result = call_tool(self._endpoint, remote, arguments, timeout=self.timeout_seconds)
        except McpUnavailable as exc:
            self._record_contact(error=str(exc))
            raise ToolError(
                f"the MCP server {self._server_name} did not answer: {exc}. "
                "The tool is unavailable right now."
            ) from None
        self._record_contact(error="")
        text = _result_text(result)
        if result.is_error:
            raise ToolError(f"{remote} on {self._server_name} reported an error: {text}")
        return text

    def _record_contact(self, *, error: str) -> None:
        from agents.services.mcp import mcp_server_record_contact

        mcp_server_record_contact(server_id=self._server_id, error=self.redact(error))


def _result_text(result: Any) -> str:
    """Text parts as they are, other content named, structured content as JSON."""
    parts: list[str] = []
    for block in result.content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        else:
            parts.append(f"[{kind or 'unknown'} content, not shown]")
    structured = result.structured_content
    if structured is not None and not parts:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts) if parts else "(no output)"
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[result cut at {MAX_RESULT_CHARS} characters]"
    return text
