"""The rows a fresh install needs, seeded after migrate and by ``serve``."""

from __future__ import annotations

import pytest

from agents.llm.factory import is_demo_model
from agents.models import AgentProfile, ModelConfig, PromptVersion, ToolConfig
from agents.services.defaults import DEFAULT_PROFILE_SLUG, DEFAULT_TOOLS, ensure_defaults
from agents.tools.registry import tool_kinds


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_a_migrated_database_can_answer_a_first_message(db):
    profile = AgentProfile.objects.get(is_default=True)

    assert profile.slug == DEFAULT_PROFILE_SLUG
    assert profile.mode == AgentProfile.Mode.REACT
    assert sorted(profile.tools.values_list("name", flat=True)) == sorted(DEFAULT_TOOLS)
    assert is_demo_model(profile.model_config)  # settings' OPENAI_* or the demo model
    assert PromptVersion.objects.filter(profile=profile).count() == 1


def test_default_tools_are_registered_kinds(db):
    kinds = tool_kinds()
    for tool in ToolConfig.objects.filter(name__in=DEFAULT_TOOLS):
        assert tool.kind in kinds


def _counts() -> tuple[int, int, int]:
    return (
        ModelConfig.objects.count(),
        ToolConfig.objects.count(),
        PromptVersion.objects.count(),
    )


def test_ensure_defaults_is_idempotent_and_keeps_operator_edits(db):
    calculator = ToolConfig.objects.get(name="calculator")
    calculator.description = "Edited by staff."
    calculator.save()
    counts = (
        ModelConfig.objects.count(),
        ToolConfig.objects.count(),
        PromptVersion.objects.count(),
    )

    profile = ensure_defaults()
    ensure_defaults()

    assert profile.is_default
    assert (
        ModelConfig.objects.count(),
        ToolConfig.objects.count(),
        PromptVersion.objects.count(),
    ) == counts
    calculator.refresh_from_db()
    assert calculator.description == "Edited by staff."


def test_another_default_chosen_by_staff_stays_the_default(db):
    AgentProfile.objects.filter(is_default=True).update(is_default=False)
    chosen = AgentProfile.objects.create(name="Chosen", slug="chosen", is_default=True)

    assert ensure_defaults() == chosen
    assert AgentProfile.objects.filter(is_default=True).get() == chosen
