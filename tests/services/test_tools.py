"""Configured tools outside a run: the write-only secret merge and one call by hand."""

from __future__ import annotations

import pytest

from agents.models import ToolConfig
from agents.services.tools import tool_config_run_once, tool_config_secrets_update

pytestmark = pytest.mark.django_db


@pytest.fixture
def tool_config():
    tool_config = ToolConfig.objects.create(
        name="rooms", kind="lookup_table", description="d", config={"table": {"a": "1"}}
    )
    tool_config.set_secrets({"TOKEN": "token-value", "OTHER": "other-value"})
    tool_config.save()
    return tool_config


def test_entered_secrets_are_merged_and_an_empty_value_removes_one(tool_config):
    tool_config_secrets_update(
        tool_config=tool_config, entered={"TOKEN": "new-token", "OTHER": "", "NEW": "n-value"}
    )
    tool_config.save()

    tool_config.refresh_from_db()
    assert tool_config.get_secrets() == {"TOKEN": "new-token", "NEW": "n-value"}


def test_nothing_entered_keeps_the_stored_secrets(tool_config):
    before = tool_config.secrets_encrypted

    tool_config_secrets_update(tool_config=tool_config, entered={})

    assert tool_config.secrets_encrypted == before


def test_clear_all_drops_the_stored_secrets_before_the_entered_ones(tool_config):
    tool_config_secrets_update(tool_config=tool_config, entered={"NEW": "n-value"}, clear_all=True)

    assert tool_config.get_secrets() == {"NEW": "n-value"}


def test_secrets_under_another_key_are_replaced_by_what_is_entered(tool_config, settings):
    settings.SECRET_KEY = "another key entirely, so the stored secrets cannot be read"

    tool_config_secrets_update(tool_config=tool_config, entered={"TOKEN": "fresh-token"})

    assert tool_config.get_secrets() == {"TOKEN": "fresh-token"}


def test_a_call_by_hand_answers_with_the_output_or_the_reason(tool_config, user):
    found = tool_config_run_once(tool_config=tool_config, tool_input="a", user=user)
    wrong = tool_config_run_once(tool_config=tool_config, tool_input={"nope": 1}, user=user)

    assert (found.ok, found.output) == (True, "1")
    assert not wrong.ok
    assert wrong.output.startswith("The input does not fit this tool:")
