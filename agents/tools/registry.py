"""The registered tool kinds, and how a ``ToolConfig`` row becomes a tool the engine runs.

A kind is a ``ConfiguredTool`` subclass plus the JSON schema of its admin config and the
names of the secrets it may use. Adding one is a module in ``builtin/`` and one
``register_kind`` line in ``_register_builtins`` below; the admin offers it at once.
Built-ins register when this module is imported, so nothing depends on app-loading order
(builtin modules import Django models only inside ``run``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.tools.base import ConfiguredTool
from agents.tools.schema import JsonDict, schema_errors, with_defaults

if TYPE_CHECKING:
    from agents.models import ToolConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolKind:
    kind: str
    tool_class: type[ConfiguredTool]
    config_schema: JsonDict
    secret_names: tuple[str, ...] = ()
    # Shown in the admin next to the kind; the tool class's docstring summary.
    summary: str = field(default="")

    @property
    def default_name(self) -> str:
        return self.tool_class.name

    @property
    def needs_approval_by_default(self) -> bool:
        return self.tool_class.needs_approval_by_default

    def unavailable_reason(self) -> str:
        return self.tool_class.unavailable_reason()


_KINDS: dict[str, ToolKind] = {}


def register_kind(
    kind: str,
    tool_class: type[ConfiguredTool],
    *,
    config_schema: JsonDict,
    secret_names: tuple[str, ...] = (),
) -> ToolKind:
    """Make ``kind`` available to ToolConfig rows. Registering a kind twice replaces it."""
    if not issubclass(tool_class, ConfiguredTool):
        raise TypeError(f"{tool_class.__name__} must subclass ConfiguredTool")
    if config_schema.get("type", "object") != "object":
        raise ValueError(f"the config schema of {kind!r} must describe an object")
    summary = (tool_class.__doc__ or "").strip().splitlines()[0] if tool_class.__doc__ else ""
    registered = ToolKind(
        kind=kind,
        tool_class=tool_class,
        config_schema=config_schema,
        secret_names=tuple(secret_names),
        summary=summary,
    )
    _KINDS[kind] = registered
    return registered


def tool_kinds() -> dict[str, ToolKind]:
    return dict(_KINDS)


def validate_tool_config(kind: str, config: Any) -> dict[str, str]:
    """Field -> error for a kind's JSON config; empty when valid.

    Field names are dotted paths into the config (``table``, ``headers.Authorization``);
    ``kind`` and ``config`` name errors about the whole thing.
    """
    registered = _KINDS.get(kind)
    if registered is None:
        known = ", ".join(sorted(_KINDS))
        return {"kind": f"unknown tool kind {kind!r}; choose one of: {known}"}
    if config is None:
        config = {}
    errors = schema_errors(registered.config_schema, config)
    if errors:
        return errors
    return registered.tool_class.check_config(with_defaults(registered.config_schema, config))


def build_tool(tool_config: ToolConfig, *, user: Any, conversation: Any = None) -> ConfiguredTool:
    """One configured tool, enabled or not (the admin's "Test tool" uses this).

    Raises ``ValueError`` with the field errors when the kind is unknown or the stored config
    is invalid.
    """
    from agents.crypto import SecretUnreadable

    errors = validate_tool_config(tool_config.kind, tool_config.config)
    if errors:
        details = "; ".join(f"{field}: {message}" for field, message in errors.items())
        raise ValueError(f"tool {tool_config.name} is misconfigured: {details}")
    registered = _KINDS[tool_config.kind]
    try:
        secrets: Mapping[str, str] = tool_config.get_secrets()
    except SecretUnreadable:
        logger.warning("secrets of tool %s are unreadable; re-enter them", tool_config.name)
        secrets = {}
    return registered.tool_class(
        name=tool_config.name,
        description=tool_config.description,
        config=with_defaults(registered.config_schema, tool_config.config or {}),
        secrets=secrets,
        timeout_seconds=tool_config.timeout_seconds,
        return_direct=tool_config.return_direct,
        needs_approval=tool_config.needs_approval,
        read_only=tool_config.read_only,
        user=user,
        conversation=conversation,
    )


def build_tools(
    tool_configs: Iterable[ToolConfig], *, user: Any, conversation: Any = None
) -> list[ConfiguredTool]:
    """The enabled tools, ready for the engine, in the order given.

    A tool whose kind is gone or whose config no longer validates is left out with a
    warning rather than failing every run of the profiles that use it.
    """
    tools: list[ConfiguredTool] = []
    for tool_config in tool_configs:
        if not tool_config.enabled:
            continue
        try:
            tools.append(build_tool(tool_config, user=user, conversation=conversation))
        except ValueError as exc:
            logger.warning("skipping tool: %s", exc)
    return tools


def _register_builtins() -> None:
    from agents.tools.builtin import (
        calculator,
        conversation_search,
        current_time,
        delegate,
        http_request,
        knowledge_search,
        lookup_table,
        mcp_tool,
        openapi_operation,
        python_sandbox,
    )

    register_kind("calculator", calculator.Calculator, config_schema=calculator.CONFIG_SCHEMA)
    register_kind(
        "current_time", current_time.CurrentTime, config_schema=current_time.CONFIG_SCHEMA
    )
    register_kind(
        "lookup_table", lookup_table.LookupTable, config_schema=lookup_table.CONFIG_SCHEMA
    )
    register_kind(
        "http_request",
        http_request.HttpRequestTool,
        config_schema=http_request.CONFIG_SCHEMA,
        secret_names=http_request.SECRET_NAMES,
    )
    register_kind(
        "knowledge_search",
        knowledge_search.KnowledgeSearch,
        config_schema=knowledge_search.CONFIG_SCHEMA,
    )
    register_kind(
        "conversation_search",
        conversation_search.ConversationSearch,
        config_schema=conversation_search.CONFIG_SCHEMA,
    )
    register_kind("mcp", mcp_tool.McpTool, config_schema=mcp_tool.CONFIG_SCHEMA)
    register_kind(
        "openapi",
        openapi_operation.OpenApiOperation,
        config_schema=openapi_operation.CONFIG_SCHEMA,
        secret_names=openapi_operation.SECRET_NAMES,
    )
    register_kind(
        "python", python_sandbox.PythonSandbox, config_schema=python_sandbox.CONFIG_SCHEMA
    )
    register_kind(delegate.KIND, delegate.Delegate, config_schema=delegate.CONFIG_SCHEMA)


_register_builtins()
