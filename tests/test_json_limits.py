"""chatsite/server/json_limits.py: JSON from clients, with nesting bounded."""

from __future__ import annotations

import json

import pytest

from chatsite.server.json_limits import JsonTooDeep, loads_bounded


def test_a_document_within_the_limit_parses():
    assert loads_bounded('{"a": [1, {"b": [2]}]}', max_depth=4) == {"a": [1, {"b": [2]}]}
    assert loads_bounded("[" * 3 + "]" * 3, max_depth=3) == [[[]]]


@pytest.mark.parametrize("text", ["[" * 4 + "]" * 4, '{"a": {"b": {"c": {"d": 1}}}}'])
def test_one_level_too_many_is_refused(text):
    with pytest.raises(JsonTooDeep, match="nested deeper than 3 levels"):
        loads_bounded(text, max_depth=3)


def test_nesting_past_the_recursion_limit_is_refused_not_a_crash():
    with pytest.raises(JsonTooDeep):
        loads_bounded("[" * 50_000)
    with pytest.raises(JsonTooDeep):
        loads_bounded("[" * 50_000 + "]" * 50_000)


def test_invalid_json_is_a_decode_error():
    with pytest.raises(json.JSONDecodeError):
        loads_bounded("{nope")
