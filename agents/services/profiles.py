"""Agent profiles and their immutable prompt versions."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.models import AgentProfile, PromptVersion


def profile_snapshot(profile: AgentProfile) -> dict[str, Any]:
    """Everything a run needs from a profile, frozen as plain JSON."""
    tools = list(profile.tools.order_by("name").values_list("id", "name"))
    return {
        "name": profile.name,
        "slug": profile.slug,
        "mode": profile.mode,
        "label_set": profile.label_set,
        "system_prompt": profile.system_prompt,
        "few_shot_examples": profile.few_shot_examples,
        "temperature": profile.temperature,
        "model_config_id": profile.model_config_id,
        "tool_ids": [tool_id for tool_id, _ in tools],
        "tool_names": [name for _, name in tools],
        "max_iterations": profile.max_iterations,
        "max_execution_time": profile.max_execution_time,
        "memory_strategy": profile.memory_strategy,
        "memory_window_turns": profile.memory_window_turns,
        "memory_token_budget": profile.memory_token_budget,
    }


@transaction.atomic
def prompt_version_ensure(*, profile: AgentProfile, user=None) -> PromptVersion:
    """The profile's current version, writing a new one if the profile changed since."""
    snapshot = profile_snapshot(profile)
    # Lock the profile row so two concurrent saves cannot both take the same number.
    AgentProfile.objects.select_for_update().filter(pk=profile.pk).first()
    latest = profile.versions.order_by("-number").first()
    if latest is not None and latest.snapshot == snapshot:
        return latest
    return PromptVersion.objects.create(
        profile=profile,
        number=(latest.number + 1) if latest else 1,
        snapshot=snapshot,
        created_by=user,
    )
