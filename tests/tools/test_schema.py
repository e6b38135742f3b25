"""The small JSON-schema validator behind validate_tool_config."""

from __future__ import annotations

from agents.tools.schema import schema_errors, with_defaults

SCHEMA = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        "name": {"type": "string", "minLength": 1, "maxLength": 5},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "count": {"type": "integer"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "limits": {
            "type": "object",
            "properties": {"low": {"type": "integer"}},
            "required": ["low"],
            "additionalProperties": False,
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}


def test_valid_value_has_no_errors():
    value = {
        "name": "abc",
        "ratio": 0.5,
        "count": 3,
        "flag": True,
        "tags": ["a"],
        "limits": {"low": 1},
    }
    assert schema_errors(SCHEMA, value) == {}


def test_every_field_error_is_keyed_by_its_path():
    value = {
        "mode": "medium",
        "name": "",
        "ratio": 2,
        "count": 1.5,
        "flag": "yes",
        "tags": ["a", 3],
        "limits": {"high": 1},
        "extra": 1,
    }
    assert schema_errors(SCHEMA, value) == {
        "mode": "must be one of 'fast', 'slow'",
        "name": "must not be empty",
        "ratio": "must be at most 1",
        "count": "must be a whole number",
        "flag": "must be true or false",
        "tags.1": "must be a string",
        "limits.low": "this field is required",
        "limits.high": "unknown field (known fields: low)",
        "extra": "unknown field (known fields: count, flag, limits, mode, name, ratio, tags)",
    }


def test_lengths_and_counts():
    assert schema_errors(SCHEMA, {"name": "toolong"}) == {"name": "must be at most 5 characters"}
    assert schema_errors(SCHEMA, {"name": "a", "tags": ["a", "b", "c"]}) == {
        "tags": "must have at most 2 items"
    }


def test_booleans_are_not_numbers():
    assert schema_errors(SCHEMA, {"name": "a", "count": True}) == {
        "count": "must be a whole number"
    }


def test_missing_required_and_wrong_top_level_type():
    assert schema_errors(SCHEMA, {}) == {"name": "this field is required"}
    assert schema_errors(SCHEMA, "text") == {"config": "must be an object"}


def test_defaults_fill_only_missing_fields_without_sharing_state():
    filled = with_defaults(SCHEMA, {"name": "a"})
    assert filled == {"name": "a", "mode": "fast"}
    assert with_defaults(SCHEMA, {"name": "a", "mode": "slow"})["mode"] == "slow"
