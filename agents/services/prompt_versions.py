"""Prompt versions: the immutable snapshots of a profile that runs point at.

Every save of a profile in the admin ends with ``prompt_version_ensure``; a send reuses the
latest version while it still matches the profile (``services/conversations.py``).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from agents.models import AgentProfile, PromptVersion, ToolConfig
from agents.profile_snapshot import (
    ProfileSnapshot,
    ToolPairs,
    profile_snapshot,
    snapshot_model_config,
)
from agents.services.evaluations import eval_gate_check


def prompt_version_current(
    *, profile: AgentProfile, latest: PromptVersion | None = None, tools: ToolPairs | None = None
) -> PromptVersion:
    """The profile's latest version if it still matches the profile, else a new one.

    Checked without a lock first: ``prompt_version_ensure`` locks the profile row, and every
    send of every user on the default profile would otherwise queue behind that lock.
    ``latest`` and ``tools``: the profile's latest version and its tools if the caller read
    them already (a send reads them with the profile, in its row-lock statement); else they
    are read here.
    """
    if latest is None:
        latest = profile.versions.order_by("-number").first()
    if latest is not None and latest.snapshot == profile_snapshot(profile, tools=tools):
        return latest
    return prompt_version_ensure(profile=profile)


@transaction.atomic
def prompt_version_ensure(*, profile: AgentProfile, user: User | None = None) -> PromptVersion:
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


@dataclass(frozen=True)
class RestoreResult:
    version: PromptVersion
    # What the old snapshot named that no longer exists, so it could not come back.
    missing_tools: list[str]
    missing_model_config: bool


@transaction.atomic
def prompt_version_restore(
    *, version: PromptVersion, user: User | None = None, onto: AgentProfile | None = None
) -> RestoreResult:
    """Put a profile back the way an old version had it, recorded as a new version; with
    ``onto``, give that profile the version's settings (a draft's version published).

    Old versions are never changed: the restored state becomes the next number, so the
    history still shows what was live in between.
    """
    profile = AgentProfile.objects.select_for_update().get(pk=(onto or version.profile).pk)
    snapshot = ProfileSnapshot.from_version(version)
    if onto is None:
        profile.name = snapshot.name or profile.name
    profile.mode = snapshot.mode
    profile.label_set = snapshot.label_set
    profile.system_prompt = snapshot.system_prompt
    profile.few_shot_examples = snapshot.few_shot_examples
    profile.temperature = snapshot.temperature
    profile.max_iterations = snapshot.max_iterations
    profile.max_execution_time = snapshot.max_execution_time
    profile.memory_strategy = snapshot.memory.strategy
    profile.memory_window_turns = snapshot.memory.window_turns
    profile.memory_token_budget = snapshot.memory.token_budget
    profile.suggested_prompts = "\n".join(snapshot.suggested_prompts)
    profile.budget_steps = snapshot.budget_steps
    profile.budget_tokens = snapshot.budget_tokens
    profile.budget_tool_calls = dict(snapshot.budget_tool_calls)

    profile.model_config = snapshot_model_config(snapshot)
    missing_model_config = snapshot.model_config_id is not None and profile.model_config is None
    profile.save()

    wanted = dict(zip(snapshot.tool_ids, snapshot.tool_names, strict=False))
    existing = list(ToolConfig.objects.filter(pk__in=wanted))
    profile.tools.set(existing)
    found = {tool.pk for tool in existing}
    missing_tools = sorted(name for tool_id, name in wanted.items() if tool_id not in found)

    return RestoreResult(
        version=prompt_version_ensure(profile=profile, user=user),
        missing_tools=missing_tools,
        missing_model_config=missing_model_config,
    )


def prompt_version_publish(
    *, version: PromptVersion, profile: AgentProfile, user: User | None = None
) -> RestoreResult:
    """Make ``version`` (an older one of ``profile``, or one of a draft profile) what
    ``profile`` runs with, as its next version. With ``CHAT_EVAL_GATE_PUBLISH`` on, only if
    the version passes at least what the current one passes on the profile's evaluation
    sets (``eval_gate_check``; ``EvalGateRefused`` says why not, and nothing is written)."""
    eval_gate_check(profile=profile, candidate=version)
    return prompt_version_restore(
        version=version, user=user, onto=None if version.profile_id == profile.pk else profile
    )


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "added" | "removed" | "context" | "hunk"
    text: str


def prompt_version_diff(*, version: PromptVersion) -> list[DiffLine]:
    """A unified diff of a version against the one before it (all lines added for v1).

    Read-only; lives beside the writes because it needs the same snapshot layout.
    """
    previous = (
        PromptVersion.objects.filter(profile_id=version.profile_id, number__lt=version.number)
        .order_by("-number")
        .first()
    )
    old_lines = _snapshot_lines(previous.snapshot) if previous else []
    new_lines = _snapshot_lines(version.snapshot)
    old_name = f"v{previous.number}" if previous else "(nothing)"
    lines: list[DiffLine] = []
    diff = difflib.unified_diff(
        old_lines, new_lines, fromfile=old_name, tofile=f"v{version.number}", lineterm="", n=3
    )
    for line in diff:
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            lines.append(DiffLine("added", line[1:]))
        elif line.startswith("-"):
            lines.append(DiffLine("removed", line[1:]))
        else:
            lines.append(DiffLine("context", line[1:]))
    return lines


def _snapshot_lines(snapshot: dict[str, Any]) -> list[str]:
    """A snapshot as text a person can diff: one line per setting, prompts line by line."""
    lines: list[str] = []
    for key in sorted(snapshot):
        value = snapshot[key]
        if isinstance(value, str) and "\n" in value:
            lines.append(f"{key}:")
            lines.extend(f"    {text_line}" for text_line in value.splitlines())
        else:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    return lines
