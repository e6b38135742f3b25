"""lookup_table: hits, case folding, and misses that point at nearby keys."""

from __future__ import annotations

from agents.tools.builtin.lookup_table import LookupTable
from agents.tools.registry import validate_tool_config

CAPITALS = {"France": "Paris", "Germany": "Berlin", "Greece": "Athens", "Japan": "Tokyo"}


def test_finds_a_key_ignoring_case_and_spaces_by_default():
    tool = LookupTable(config={"table": CAPITALS, "case_sensitive": False})
    assert tool.run(key="France") == "Paris"
    assert tool.run(key="  japan ") == "Tokyo"


def test_case_sensitive_table_only_matches_exactly():
    tool = LookupTable(config={"table": CAPITALS, "case_sensitive": True})
    assert tool.run(key="Japan") == "Tokyo"
    answer = tool.run(key="japan")
    assert answer.startswith("No entry for 'japan'.")
    assert "Japan" in answer


def test_miss_lists_nearby_keys():
    tool = LookupTable(config={"table": CAPITALS, "case_sensitive": False})
    answer = tool.run(key="Germny")
    assert answer == "No entry for 'Germny'. Nearby keys: Germany"


def test_miss_with_nothing_near_lists_a_small_table():
    tool = LookupTable(config={"table": CAPITALS, "case_sensitive": False})
    assert tool.run(key="Peru") == (
        "No entry for 'Peru'. Known keys: France, Germany, Greece, Japan"
    )


def test_miss_in_a_big_table_says_nothing_is_close():
    table = {f"item-{n}": str(n) for n in range(100)}
    tool = LookupTable(config={"table": table, "case_sensitive": False})
    assert tool.run(key="zebra") == (
        "No entry for 'zebra'. The table has 100 keys; none is close to it."
    )


def test_config_errors_name_the_field():
    assert validate_tool_config("lookup_table", {}) == {"table": "this field is required"}
    assert validate_tool_config("lookup_table", {"table": {"a": 1}}) == {
        "table.a": "must be a string"
    }
    assert validate_tool_config("lookup_table", {"table": {}}) == {"table": "add at least one key"}
    errors = validate_tool_config("lookup_table", {"table": {"Key": "1", "key": "2"}})
    assert "differ only in case" in errors["table"]
    assert (
        validate_tool_config(
            "lookup_table", {"table": {"Key": "1", "key": "2"}, "case_sensitive": True}
        )
        == {}
    )
