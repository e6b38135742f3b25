"""The registry: kinds, config validation with field errors, and building configured tools."""

from __future__ import annotations

import pytest

from agents.models import ToolConfig
from agents.react.tools import SuspendRun
from agents.tools import registry
from agents.tools.base import REDACTED, ConfiguredTool, ToolError
from agents.tools.builtin.calculator import Calculator
from agents.tools.registry import (
    build_tool,
    build_tools,
    register_kind,
    tool_kinds,
    validate_tool_config,
)

pytestmark = pytest.mark.django_db

BUILTIN_KINDS = {
    "calculator",
    "current_time",
    "lookup_table",
    "http_request",
    "knowledge_search",
    "conversation_search",
}


def test_builtin_kinds_are_registered_on_import():
    kinds = tool_kinds()
    assert set(kinds) >= BUILTIN_KINDS
    assert kinds["calculator"].tool_class is Calculator
    assert kinds["calculator"].default_name == "calculator"
    assert kinds["calculator"].summary


def test_unknown_kind_is_an_error_on_the_kind_field():
    errors = validate_tool_config("teleporter", {})
    assert list(errors) == ["kind"]
    assert "calculator" in errors["kind"]


def test_config_must_be_an_object():
    assert validate_tool_config("calculator", ["not", "an", "object"]) == {
        "config": "must be an object"
    }


def test_unknown_and_out_of_range_fields_are_named():
    errors = validate_tool_config("calculator", {"max_input_chars": 0, "colour": "red"})
    assert errors == {
        "max_input_chars": "must be at least 1",
        "colour": "unknown field (known fields: max_input_chars)",
    }
    assert validate_tool_config("calculator", {}) == {}
    assert validate_tool_config("calculator", None) == {}


def _tool_config(name: str, kind: str = "calculator", **fields) -> ToolConfig:
    fields.setdefault("description", f"{name} for tests")
    return ToolConfig.objects.create(name=name, kind=kind, **fields)


def test_build_tools_skips_disabled_tools_and_keeps_order(user):
    first = _tool_config("calc_b")
    _tool_config("calc_off", enabled=False)
    second = _tool_config("capitals", kind="lookup_table", config={"table": {"France": "Paris"}})
    mine = ToolConfig.objects.filter(name__in=["calc_b", "calc_off", "capitals"])
    tools = build_tools(mine.order_by("-name"), user=user)
    assert [tool.name for tool in tools] == [second.name, first.name]


def test_built_tool_carries_the_admin_settings(user):
    _tool_config(
        "capitals",
        kind="lookup_table",
        description="Capital city of a country. Input: the country.",
        config={"table": {"France": "Paris"}},
        timeout_seconds=2.5,
        return_direct=True,
    )
    (tool,) = build_tools(ToolConfig.objects.filter(name="capitals"), user=user)
    assert tool.name == "capitals"
    assert tool.description == "Capital city of a country. Input: the country."
    assert tool.timeout_seconds == 2.5
    assert tool.return_direct is True
    assert tool.user == user
    # Schema defaults are filled in for the tool.
    assert tool.config == {"table": {"France": "Paris"}, "case_sensitive": False}
    assert tool.run(key="france") == "Paris"


def test_misconfigured_or_unknown_kind_is_skipped_not_fatal(user, caplog):
    _tool_config("broken", kind="lookup_table", config={"table": "nope"})
    _tool_config("gone", kind="removed_kind")
    _tool_config("calc")
    mine = ToolConfig.objects.filter(name__in=["broken", "gone", "calc"])
    tools = build_tools(mine, user=user)
    assert [tool.name for tool in tools] == ["calc"]
    assert "broken is misconfigured: table: must be an object" in caplog.text
    with pytest.raises(ValueError, match="unknown tool kind 'removed_kind'"):
        build_tool(ToolConfig.objects.get(name="gone"), user=user)


class _EchoSecret(ConfiguredTool):
    """Echoes a secret back, as a careless remote server might."""

    name = "echo_secret"
    description = "test tool"

    def run(self, text: str) -> str:
        if text == "fail":
            raise ToolError(f"server said: bad token {self.secret('TOKEN')}")
        if text == "crash":
            raise KeyError(self.secret("TOKEN"))
        return f"{text} {self.fill_secrets('Bearer {secret:TOKEN}')}"


@pytest.fixture(autouse=True)
def _echo_secret_kind():
    """Registered for these tests only, so other tests see just the real kinds."""
    register_kind(
        "test_echo_secret",
        _EchoSecret,
        config_schema={"type": "object", "properties": {}},
        secret_names=("TOKEN",),
    )
    yield
    registry._KINDS.pop("test_echo_secret")


TOKEN = "s3cr3t-token-value"


def test_secrets_never_leave_the_tool(user):
    config = ToolConfig(
        name="echo", kind="test_echo_secret", description=f"do not show {TOKEN} to the model"
    )
    config.set_secrets({"TOKEN": TOKEN})
    config.save()
    (tool,) = build_tools([config], user=user)
    assert TOKEN not in tool.description
    assert TOKEN not in repr(tool)
    assert TOKEN not in str(tool.openai_schema())
    assert tool.run(text="hello") == f"hello Bearer {REDACTED}"
    with pytest.raises(ToolError) as failed:
        tool.run(text="fail")
    assert TOKEN not in str(failed.value)
    assert failed.value.__cause__ is None
    with pytest.raises(ToolError) as crashed:
        tool.run(text="crash")
    assert str(crashed.value) == f"KeyError: '{REDACTED}'"
    assert tool.secret("TOKEN") == TOKEN  # still reaches the code that needs it


def test_missing_secret_is_named_not_shown(user):
    (tool,) = build_tools([_tool_config("echo", kind="test_echo_secret")], user=user)
    with pytest.raises(ToolError, match="the secret TOKEN is not set for tool echo"):
        tool.run(text="hello")


def test_run_keeps_its_argument_schema_through_the_redacting_wrapper():
    assert _EchoSecret.args_schema() == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }


class _Suspending(ConfiguredTool):
    name = "suspending"
    description = "Waits for something outside the run."

    def run(self, text: str) -> str:
        raise SuspendRun(f"waiting on {self.secret('TOKEN')}")


def test_a_suspension_passes_the_redacting_wrapper_as_a_suspension_without_secrets():
    tool = _Suspending(secrets={"TOKEN": "tok-77"})
    with pytest.raises(SuspendRun) as suspended:
        tool.run(text="x")
    assert "tok-77" not in str(suspended.value)
    assert suspended.value.__context__ is None
