"""Arguments for tools whose schema comes from elsewhere (an MCP server, an OpenAPI document).

Those schemas use all of JSON schema, so they are checked with ``jsonschema`` rather than
the engine's type-hint checks.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agents.react.tools import JsonDict, ToolInputError


def object_schema(schema: Any) -> JsonDict:
    """``schema`` as an object schema with ``properties`` and ``required`` (as models expect)."""
    schema = dict(schema) if isinstance(schema, dict) else {}
    schema["type"] = "object"
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    return schema


def checked_arguments(tool_name: str, tool_input: str | JsonDict, schema: JsonDict) -> JsonDict:
    """The arguments a model wrote, as an object that fits ``schema``.

    Text is parsed as a JSON object; other text goes to the only required (or only)
    argument, as with the built-in tools. A mismatch is a ``ToolInputError`` that says
    where, so the model can fix its call.
    """
    properties: dict[str, Any] = schema.get("properties", {})
    if isinstance(tool_input, str):
        stripped = tool_input.strip()
        parsed: Any = None
        if stripped.startswith("{"):
            try:
                parsed = json.loads(stripped)
            except json.JSONDecodeError:
                parsed = None
        if isinstance(parsed, dict):
            tool_input = parsed
        elif not stripped and not schema.get("required"):
            tool_input = {}
        else:
            targets = schema.get("required") or list(properties)
            if len(targets) != 1:
                raise ToolInputError(
                    f"{tool_name} takes a JSON object with keys {sorted(properties)}"
                )
            tool_input = {targets[0]: tool_input}
    try:
        validator = Draft202012Validator(schema)
        error = next(iter(sorted(validator.iter_errors(tool_input), key=lambda e: e.path)), None)
    except SchemaError as exc:
        raise ToolInputError(f"{tool_name} has an invalid input schema: {exc.message}") from None
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path) or "the input"
        raise ToolInputError(f"{tool_name}: {where}: {error.message}")
    return dict(tool_input)
