"""Importing operations of an OpenAPI document as ``openapi`` tools."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agents.models import ToolConfig
from agents.tools.base import ToolError
from agents.tools.builtin.openapi_operation import CONFIG_SCHEMA, OpenApiOperation
from agents.tools.openapi import Operation, tool_config
from agents.tools.registry import validate_tool_config
from agents.tools.schema import with_defaults


class ImportRefused(ValueError):
    """An operation cannot become a tool; the message names it and says why."""


# Methods that only read; any other (POST, PUT, PATCH, DELETE) may change something.
READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def needs_approval_by_default(operation: Operation) -> bool:
    """An operation whose method may change something pauses for its owner's approval
    unless staff say otherwise, as an MCP tool not marked read-only does."""
    return operation.method.upper() not in READ_ONLY_METHODS


@dataclass(frozen=True)
class ImportChoice:
    operation: Operation
    tool_name: str
    needs_approval: bool | None = None  # None: by the operation's method


def openapi_tools_import(
    *,
    choices: Iterable[ImportChoice],
    server_url: str,
    allow_hosts: list[str],
    secrets: Mapping[str, str],
    timeout_seconds: float,
) -> list[ToolConfig]:
    """One tool per chosen operation, all or none.

    Every operation's URL goes through the SSRF guard now, so an operation (or a server
    URL) that points at a private address is refused at import rather than at its first
    call; calls are checked again, since DNS may change.
    """
    created: list[ToolConfig] = []
    with transaction.atomic():
        for choice in choices:
            operation = choice.operation
            if operation.unsupported:
                raise ImportRefused(f"{operation.key} cannot be imported: {operation.unsupported}")
            config = tool_config(
                operation,
                server_url=server_url,
                allow_hosts=allow_hosts,
                timeout_seconds=timeout_seconds,
            )
            errors = validate_tool_config("openapi", config)
            if errors:
                details = "; ".join(f"{field}: {message}" for field, message in errors.items())
                raise ImportRefused(f"{operation.key}: {details}")
            _refuse_private_target(operation, config)
            tool = ToolConfig(
                name=choice.tool_name,
                kind="openapi",
                description=operation.description,
                config=config,
                timeout_seconds=timeout_seconds,
                needs_approval=(
                    needs_approval_by_default(operation)
                    if choice.needs_approval is None
                    else choice.needs_approval
                ),
            )
            needed = {scheme.secret_name for scheme in operation.schemes}
            tool.set_secrets({name: secrets[name] for name in needed if secrets.get(name)})
            tool.full_clean()
            tool.save()
            created.append(tool)
    return created


def _refuse_private_target(operation: Operation, config: dict[str, Any]) -> None:
    import httpx2

    probe = OpenApiOperation(name="import_check", config=with_defaults(CONFIG_SCHEMA, config))
    # The host part only: path placeholders are not filled yet.
    url = httpx2.URL(config["url_template"].split("{", 1)[0])
    try:
        probe._checked(url)
    except ToolError as exc:  # RefusedTarget, or a host that does not resolve
        raise ImportRefused(f"{operation.key} is refused: {exc}") from None
