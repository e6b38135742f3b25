"""Fixtures for the python tool's sandbox tests: the tool as staff would configure it."""

from __future__ import annotations

import pytest

from agents.tools import sandbox
from agents.tools.registry import tool_kinds
from agents.tools.schema import with_defaults


@pytest.fixture
def sandbox_ready() -> None:
    # Not a skip: `make test` installs bubblewrap and builds the sandbox's virtualenv, and a
    # machine without them must fail here rather than pass without testing anything.
    reason = sandbox.unavailable_reason()
    assert not reason, f"the sandbox cannot run here ({reason}): run `make sandbox-venv`"


@pytest.fixture
def python_tool(sandbox_ready):
    """``python_tool(conversation=None, timeout_seconds=60, **config)``: the tool kind built
    as the registry builds it, its config checked against the kind's schema."""
    kind = tool_kinds()["python"]

    def make(*, conversation=None, user=None, timeout_seconds: float = 60.0, **config):
        from agents.tools.schema import schema_errors

        assert not schema_errors(kind.config_schema, config)
        return kind.tool_class(
            config=with_defaults(kind.config_schema, config),
            timeout_seconds=timeout_seconds,
            needs_approval=True,
            conversation=conversation,
            user=user if user is not None else getattr(conversation, "owner", None),
        )

    return make
