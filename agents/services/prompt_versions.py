"""Prompt versions: the immutable snapshots of a profile that runs point at.

Every save of a profile in the admin ends with ``prompt_version_ensure``; a send reuses the
live version while it still matches the profile (``services/conversations.py``).

**Where a version goes live.** The profile's row is what runs read, so a version is live when
the row holds it; ``prompt_version_live`` is the highest-numbered version that is not a
draft. The publishing gate (``CHAT_EVAL_GATE_PUBLISH``, ``eval_gate_check``) is applied in
one place, ``prompt_version_publish``, and every way a version goes live goes through it or
cannot happen while the gate holds the profile (``prompt_version_gated``): Restore and
Publish call it; a save of a gated profile writes what changed as a draft
(``prompt_version_draft``) and leaves the row as it was, so nothing reaches a run until the
draft is published.
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
from agents.services.evaluations import eval_gate_applies, eval_gate_check


def prompt_version_live(*, profile: AgentProfile) -> PromptVersion | None:
    """The version runs of ``profile`` use: its highest-numbered one that is not a draft.
    ``agents/db/statements.py`` (``latest_version_id``) reads the same in SQL."""
    return profile.versions.filter(is_draft=False).order_by("-number").first()


def prompt_version_newest(*, profile: AgentProfile) -> PromptVersion | None:
    """The profile's newest version, a draft included: what staff last saved."""
    return profile.versions.order_by("-number").first()


def prompt_version_gated(*, profile: AgentProfile) -> bool:
    """Whether a change to ``profile`` must pass the publishing gate before it is live: the
    gate is on, the profile has evaluation sets and a live version to compare with. A save
    of such a profile writes a draft (``prompt_version_draft``) instead."""
    return (
        profile.pk is not None
        and eval_gate_applies(profile=profile)
        and profile.versions.filter(is_draft=False).exists()
    )


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
        latest = prompt_version_live(profile=profile)
    if latest is not None and latest.snapshot == profile_snapshot(profile, tools=tools):
        return latest
    return prompt_version_ensure(profile=profile)


@transaction.atomic
def prompt_version_ensure(*, profile: AgentProfile, user: User | None = None) -> PromptVersion:
    """The profile's live version, writing a new one if the profile changed since.

    A draft newer than the live version that holds what the profile now holds becomes live
    itself (a published draft keeps its number, and the evaluations run against it)."""
    snapshot = profile_snapshot(profile)
    # Lock the profile row so two concurrent saves cannot both take the same number.
    AgentProfile.objects.select_for_update().filter(pk=profile.pk).first()
    live = prompt_version_live(profile=profile)
    if live is not None and live.snapshot == snapshot:
        return live
    newer_drafts = profile.versions.filter(is_draft=True).order_by("-number")
    if live is not None:
        newer_drafts = newer_drafts.filter(number__gt=live.number)
    for draft in newer_drafts:
        if draft.snapshot == snapshot:
            draft.is_draft = False
            draft.save(update_fields=["is_draft"])
            return draft
    return _next_version(profile, snapshot=snapshot, user=user, is_draft=False)


@transaction.atomic
def prompt_version_draft(
    *, profile: AgentProfile, tools: ToolPairs, user: User | None = None
) -> PromptVersion | None:
    """What ``profile`` holds in memory (an admin form's edits, not saved) with ``tools``,
    written as a draft version that runs do not use until it is published. None when it is
    what the live version holds already; the newest draft when it holds the same."""
    snapshot = profile_snapshot(profile, tools=tools)
    AgentProfile.objects.select_for_update().filter(pk=profile.pk).first()
    live = prompt_version_live(profile=profile)
    if live is not None and live.snapshot == snapshot:
        return None
    newest = prompt_version_newest(profile=profile)
    if newest is not None and newest.is_draft and newest.snapshot == snapshot:
        return newest
    return _next_version(profile, snapshot=snapshot, user=user, is_draft=True)


def _next_version(
    profile: AgentProfile, *, snapshot: dict[str, Any], user: User | None, is_draft: bool
) -> PromptVersion:
    newest = prompt_version_newest(profile=profile)
    return PromptVersion.objects.create(
        profile=profile,
        number=(newest.number + 1) if newest else 1,
        snapshot=snapshot,
        created_by=user,
        is_draft=is_draft,
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
    missing_model_config = profile_from_snapshot(
        profile,
        version=version,
        keep_name=onto is not None,
        # A draft's slug is part of what was saved; an old version's is not brought back.
        with_slug=onto is None and version.is_draft,
    )
    profile.save()

    snapshot = ProfileSnapshot.from_version(version)
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


def profile_from_snapshot(
    profile: AgentProfile, *, version: PromptVersion, keep_name: bool, with_slug: bool
) -> bool:
    """Set ``profile``'s fields (not its tools, not saved) to what ``version`` holds; True
    if the version's model endpoint no longer exists (the profile then has none)."""
    snapshot = ProfileSnapshot.from_version(version)
    if not keep_name:
        profile.name = snapshot.name or profile.name
    if with_slug:
        profile.slug = snapshot.slug or profile.slug
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
    return snapshot.model_config_id is not None and profile.model_config is None


def prompt_version_publish(
    *, version: PromptVersion, profile: AgentProfile, user: User | None = None
) -> RestoreResult:
    """Make ``version`` (a draft or an older one of ``profile``, or one of a draft profile)
    what ``profile`` runs with: a draft newer than the live version becomes live itself, any
    other as the profile's next version. With ``CHAT_EVAL_GATE_PUBLISH`` on, only if the
    version passes at least what the live one passes on the profile's evaluation sets
    (``eval_gate_check``; ``EvalGateRefused`` says why not, and nothing is written). The one
    place the gate is applied (this module's docstring)."""
    eval_gate_check(
        profile=profile, candidate=version, current=prompt_version_live(profile=profile)
    )
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
