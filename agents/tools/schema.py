"""A small validator for the subset of JSON schema that tool kinds use for their config.

Supported keywords: ``type`` (object, string, integer, number, boolean, array), ``properties``,
``required``, ``additionalProperties`` (a bool or a schema), ``items``, ``enum``, ``minimum``,
``maximum``, ``minLength``, ``maxLength``, ``maxItems``, ``maxProperties`` and ``default``.
Errors are keyed by the dotted path of the field, so a form can show them next to it.
"""

from __future__ import annotations

import copy
from typing import Any

JsonDict = dict[str, Any]

_TYPE_NAMES = {
    "object": "an object",
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
}


def schema_errors(schema: JsonDict, value: Any) -> dict[str, str]:
    """Field path -> error message; empty when ``value`` fits ``schema``."""
    errors: dict[str, str] = {}
    _check(schema, value, "", errors)
    return errors


def with_defaults(schema: JsonDict, config: JsonDict) -> JsonDict:
    """A copy of ``config`` with the top-level defaults of ``schema`` filled in."""
    filled = copy.deepcopy(config)
    for name, spec in schema.get("properties", {}).items():
        if name not in filled and "default" in spec:
            filled[name] = copy.deepcopy(spec["default"])
    return filled


def _check(schema: JsonDict, value: Any, path: str, errors: dict[str, str]) -> None:
    where = path or "config"
    expected = schema.get("type")
    if expected and not _is_type(value, expected):
        errors[where] = f"must be {_TYPE_NAMES.get(expected, expected)}"
        return
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(repr(choice) for choice in schema["enum"])
        errors[where] = f"must be one of {choices}"
        return
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors[where] = (
                "must not be empty"
                if schema["minLength"] == 1
                else f"must be at least {schema['minLength']} characters"
            )
        elif "maxLength" in schema and len(value) > schema["maxLength"]:
            errors[where] = f"must be at most {schema['maxLength']} characters"
    elif _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errors[where] = f"must be at least {schema['minimum']}"
        elif "maximum" in schema and value > schema["maximum"]:
            errors[where] = f"must be at most {schema['maximum']}"
    elif isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors[where] = f"must have at most {schema['maxItems']} items"
            return
        for index, item in enumerate(value):
            if "items" in schema:
                _check(schema["items"], item, _join(path, str(index)), errors)
    elif isinstance(value, dict):
        _check_object(schema, value, path, errors)


def _check_object(schema: JsonDict, value: JsonDict, path: str, errors: dict[str, str]) -> None:
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors[path or "config"] = f"must have at most {schema['maxProperties']} entries"
        return
    properties: JsonDict = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in value:
            errors[_join(path, name)] = "this field is required"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        field = _join(path, str(name))
        if name in properties:
            _check(properties[name], item, field, errors)
        elif extra is False:
            known = ", ".join(sorted(properties)) or "none"
            errors[field] = f"unknown field (known fields: {known})"
        elif isinstance(extra, dict):
            _check(extra, item, field, errors)


def _is_type(value: Any, expected: str) -> bool:
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    raise ValueError(f"unsupported schema type {expected!r}")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
