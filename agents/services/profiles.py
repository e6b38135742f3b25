"""Agent profiles: saving one, and previewing the exact first request a run would send."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from agents.memory.services import memory_for_run
from agents.models import AgentProfile, Conversation, PromptVersion, ToolConfig
from agents.profile_snapshot import ProfileSnapshot, snapshot_model_name
from agents.react.errors import PromptTemplateError
from agents.react.prompt import render_preview
from agents.react.types import ChatMessage, JsonDict
from agents.redaction import redact
from agents.runtime import prompt_config, snapshot_tool_configs
from agents.services.prompt_versions import (
    profile_from_snapshot,
    prompt_version_draft,
    prompt_version_ensure,
    prompt_version_live,
)
from agents.services.tools import tool_config_secret_values
from agents.tools.registry import build_tool


@transaction.atomic
def profile_save(*, profile: AgentProfile, is_default: bool) -> AgentProfile:
    """Save a profile's own fields; making it the default takes the flag from the old one.

    Only one profile may be the default (a database constraint), so the flag moves instead of
    failing. The caller saves many-to-many fields afterwards and then calls
    ``prompt_version_ensure`` (``services/prompt_versions.py``): the snapshot includes the
    tools.
    """
    if is_default:
        AgentProfile.objects.filter(is_default=True).exclude(pk=profile.pk).update(is_default=False)
    profile.is_default = is_default
    profile.save()
    return profile


@transaction.atomic
def profile_save_as_draft(
    *, profile: AgentProfile, tools: Sequence[ToolConfig], is_default: bool, user: User | None
) -> PromptVersion | None:
    """Save a profile the publishing gate holds (``prompt_version_gated``): what a version
    holds, as ``profile`` has it in memory (a form's edits) with ``tools``, is written as a
    draft version (``prompt_version_draft``; None when it is what the live version holds);
    the row keeps the live version's settings and tools, so no run sees the draft, and only
    what no version holds (the description, the default flag) is saved at once. The caller
    saves the groups."""
    pairs = list(
        ToolConfig.objects.filter(pk__in=[tool.pk for tool in tools])
        .order_by("name")
        .values_list("id", "name")
    )
    draft = prompt_version_draft(profile=profile, tools=pairs, user=user)
    live = prompt_version_live(profile=profile)
    if live is not None:
        profile_from_snapshot(profile, version=live, keep_name=False, with_slug=True)
    profile_save(profile=profile, is_default=is_default)
    return draft


@dataclass(frozen=True)
class PromptPreview:
    """The first request a run would send, with every tool secret redacted."""

    messages: list[ChatMessage]
    options: JsonDict  # stop sequences, tool schemas, temperature
    problems: list[str]  # what staff should fix: disabled tools, a template that fails


def profile_preview(
    *,
    profile: AgentProfile,
    user: User,
    question: str,
    memory_summary: str = "",
    history: Sequence[ChatMessage] = (),
    conversation: Conversation | None = None,
) -> PromptPreview:
    """The exact first request a run of the profile's current version would send.

    Built from the version's snapshot by the functions a run uses (``agents/runtime.py``).
    With ``conversation`` its memory, as the profile's settings choose it, replaces
    ``memory_summary`` and ``history``: the caller checks that ``user`` may read it
    (``agents.permissions.can_read_conversation``).
    """
    snapshot = ProfileSnapshot.from_version(prompt_version_ensure(profile=profile, user=user))
    problems: list[str] = []
    if conversation is not None:
        memory = memory_for_run(
            conversation=conversation,
            snapshot=snapshot,
            model_name=snapshot_model_name(snapshot),  # token counting follows the model
            before_message=None,
        )
        memory_summary, history = memory.summary, memory.history
    problems += [
        f"Tool {tool_config.name} is disabled, so the model will not see it."
        for tool_config in profile.tools.filter(enabled=False).order_by("name")
    ]
    tools = []
    for tool_config in snapshot_tool_configs(snapshot):
        try:
            tools.append(build_tool(tool_config, user=user))
        except ValueError as exc:
            problems.append(f"{exc}; runs leave it out.")
    try:
        rendered = render_preview(
            prompt_config(snapshot),
            tools=tools,
            question=question,
            history=history,
            memory_summary=memory_summary,
            temperature=snapshot.temperature,
        )
    except PromptTemplateError as exc:
        return PromptPreview(messages=[], options={}, problems=[*problems, *exc.problems])
    secrets = tool_config_secret_values(profile.tools.all())
    return PromptPreview(
        messages=[_redacted(message, secrets) for message in rendered.messages],
        options=_redacted(rendered.options, secrets),
        problems=problems,
    )


def _redacted(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` (JSON: text, lists, objects) with ``secrets`` redacted in every string."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [_redacted(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: _redacted(item, secrets) for key, item in value.items()}
    return value
