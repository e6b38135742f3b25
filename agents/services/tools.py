"""Configured tools: their write-only secrets, and one call made by hand ("Test tool")."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from agents.crypto import SecretUnreadable, write_only_values_merged
from agents.models import ToolConfig
from agents.react.tools import ToolInputError
from agents.redaction import redact
from agents.tools.registry import build_tool, tool_kinds


def tool_config_secrets_update(
    *, tool_config: ToolConfig, entered: Mapping[str, str], clear_all: bool = False
) -> None:
    """Apply what staff typed into the write-only secrets box; the caller saves the row.

    ``entered`` maps names to new values, an empty value removing that one; the others are
    kept, unless ``clear_all`` drops every stored one first. Secrets stored under another
    ``SECRET_KEY`` cannot be read back, so whatever is entered now replaces them.
    """
    if not clear_all and not entered:
        return
    current = {} if clear_all else _readable_secrets(tool_config)
    tool_config.set_secrets(write_only_values_merged(current=current, entered=entered))


def tool_config_secret_values(tool_configs: Iterable[ToolConfig]) -> list[str]:
    """The readable secret values of these tools: what a page showing their output redacts.

    Secrets a tool uses from elsewhere (an MCP server's headers) count too.
    """
    values: list[str] = []
    for tool_config in tool_configs:
        values.extend(_readable_secrets(tool_config).values())
        kind = tool_kinds().get(tool_config.kind)
        if kind is not None:
            values.extend(kind.tool_class.linked_secret_values(tool_config.config or {}))
    return values


def tool_names_reading_private_data() -> set[str]:
    """The names of the configured tools whose results quote the user's other private data
    (``ConfiguredTool.reads_private_data``): what a shared page leaves out."""
    private_kinds = [
        name for name, kind in tool_kinds().items() if kind.tool_class.reads_private_data
    ]
    return set(ToolConfig.objects.filter(kind__in=private_kinds).values_list("name", flat=True))


def _readable_secrets(tool_config: ToolConfig) -> dict[str, str]:
    try:
        return tool_config.get_secrets()
    except SecretUnreadable:
        return {}


@dataclass(frozen=True)
class ToolTestResult:
    ok: bool
    output: str
    duration_ms: int


def tool_config_run_once(
    *, tool_config: ToolConfig, tool_input: str | dict[str, Any], user: User | None
) -> ToolTestResult:
    """Call a configured tool (even a disabled one) once, in this thread, as ``user``.

    Every outcome is an answer to "what happens when the model calls it": bad input, a
    config the kind refuses and an unexpected exception are results, never a 500. The
    output is redacted with the tool's own secrets.
    """
    started = time.monotonic()
    try:
        tool = build_tool(tool_config, user=user)
        arguments = tool.coerce_input(tool_input)
        output = tool.run(**arguments)
        ok = True
    except ToolInputError as exc:
        output, ok = f"The input does not fit this tool: {exc}", False
    except ValueError as exc:
        output, ok = str(exc), False
    except Exception as exc:
        output, ok = f"{type(exc).__name__}: {exc}", False
    duration_ms = round((time.monotonic() - started) * 1000)
    secrets = tool_config_secret_values([tool_config])
    return ToolTestResult(ok=ok, output=redact(str(output), secrets), duration_ms=duration_ms)
