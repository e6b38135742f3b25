"""A profile frozen for a run: ``PromptVersion.snapshot`` read once, typed and checked.

``profile_snapshot`` writes the JSON a ``PromptVersion`` stores; a run, a preview,
``manage.py ask`` and the summariser read it through ``ProfileSnapshot.from_json`` and nothing
else looks inside it. Older versions may lack keys added later, so a missing key takes the
default a new profile gets; a key of the wrong type is an error.

The resolvers below answer the questions every caller used to answer on its own: which
``ModelConfig`` a snapshot points at and which model name its runs call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agents.memory.strategies import MemorySettings
from agents.react.executor import AgentConfig
from agents.react.labels import LABEL_SETS
from agents.react.prompt import MODES

if TYPE_CHECKING:
    from agents.models import AgentProfile, ModelConfig, PromptVersion

_ENGINE_DEFAULTS = AgentConfig()

# A profile's tools as (id, name) pairs, ordered by name.
ToolPairs = Sequence[tuple[int, str]]


class SnapshotInvalid(ValueError):
    """The stored snapshot cannot drive a run (a key of the wrong type or an unknown value)."""


@dataclass(frozen=True)
class ProfileSnapshot:
    name: str = ""
    slug: str = ""
    mode: str = "react"
    label_set: str = "en"
    system_prompt: str = ""  # empty: the default template for the mode and label set
    few_shot_examples: str = ""
    temperature: float | None = None  # None: the model's default
    model_config_id: int | None = None  # None: the settings' endpoint or the demo model
    tool_ids: tuple[int, ...] = ()
    tool_names: tuple[str, ...] = ()
    max_iterations: int = _ENGINE_DEFAULTS.max_iterations
    max_execution_time: float = _ENGINE_DEFAULTS.max_execution_time
    memory: MemorySettings = field(default_factory=MemorySettings)
    suggested_prompts: tuple[str, ...] = ()  # the empty chat's starting points
    # Per-run budgets that stop a run with Continue (None / empty: no budget).
    budget_steps: int | None = None
    budget_tokens: int | None = None
    budget_tool_calls: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProfileSnapshot:
        """The one place a stored snapshot is parsed; ``SnapshotInvalid`` if it cannot run."""
        reader = _Reader(data)
        mode = reader.text("mode") or cls.mode
        if mode not in MODES:
            raise SnapshotInvalid(f"unknown mode {mode!r}; known: {list(MODES)}")
        label_set = reader.text("label_set") or cls.label_set
        if label_set not in LABEL_SETS:
            raise SnapshotInvalid(f"unknown label set {label_set!r}; known: {sorted(LABEL_SETS)}")
        tool_ids = tuple(reader.items("tool_ids", int))
        try:
            memory = MemorySettings.from_snapshot(dict(data))
        except (TypeError, ValueError) as exc:
            raise SnapshotInvalid(str(exc)) from None
        return cls(
            name=reader.text("name"),
            slug=reader.text("slug"),
            mode=mode,
            label_set=label_set,
            system_prompt=reader.text("system_prompt"),
            few_shot_examples=reader.text("few_shot_examples"),
            temperature=reader.number("temperature"),
            model_config_id=reader.integer("model_config_id"),
            tool_ids=tool_ids,
            tool_names=tuple(reader.items("tool_names", str)),
            # 0 was never a usable limit: it meant "the engine's default" before it was typed.
            max_iterations=reader.integer("max_iterations") or cls.max_iterations,
            max_execution_time=reader.number("max_execution_time") or cls.max_execution_time,
            memory=memory,
            suggested_prompts=tuple(reader.items("suggested_prompts", str)),
            budget_steps=reader.integer("budget_steps") or None,
            budget_tokens=reader.integer("budget_tokens") or None,
            budget_tool_calls=_tool_call_budget(data.get("budget_tool_calls")),
        )

    @classmethod
    def from_version(cls, version: PromptVersion) -> ProfileSnapshot:
        return cls.from_json(version.snapshot)

    @classmethod
    def from_profile(cls, profile: AgentProfile) -> ProfileSnapshot:
        """The profile as it is now (what its next version would store)."""
        return cls.from_json(profile_snapshot(profile))

    def with_mode(self, mode: str) -> ProfileSnapshot:
        if mode not in MODES:
            raise SnapshotInvalid(f"unknown mode {mode!r}; known: {list(MODES)}")
        return replace(self, mode=mode)


def profile_snapshot(profile: AgentProfile, *, tools: ToolPairs | None = None) -> dict[str, Any]:
    """Everything a run needs from a profile, frozen as plain JSON: what a version stores.

    ``tools``: the profile's (id, name) pairs by name, if the caller read them already (a
    send reads them with its row lock); else they are read here.
    """
    if tools is None:
        tools = list(profile.tools.order_by("name").values_list("id", "name"))
    snapshot: dict[str, Any] = {
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
    # Only when there are some: a profile without suggestions keeps the snapshot it had
    # before they existed, so adding the field wrote no new version of every profile.
    if profile.suggestions:
        snapshot["suggested_prompts"] = profile.suggestions
    # The same for budgets: only a profile that sets one gets a new version for it.
    if profile.budget_steps:
        snapshot["budget_steps"] = profile.budget_steps
    if profile.budget_tokens:
        snapshot["budget_tokens"] = profile.budget_tokens
    if profile.budget_tool_calls:
        snapshot["budget_tool_calls"] = dict(profile.budget_tool_calls)
    return snapshot


def _tool_call_budget(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(name, str) and isinstance(limit, int) and not isinstance(limit, bool)
        for name, limit in value.items()
    ):
        raise SnapshotInvalid("'budget_tool_calls' must map tool names to whole numbers")
    return {name: limit for name, limit in value.items() if limit >= 1}


class _Reader:
    """Typed reads of one snapshot's keys; a missing or null key is the empty value."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        if not isinstance(data, Mapping):
            raise SnapshotInvalid(f"a snapshot is a JSON object, not {type(data).__name__}")
        self.data = data

    def _wrong(self, key: str, expected: str) -> SnapshotInvalid:
        return SnapshotInvalid(f"{key} should be {expected}, not {self.data[key]!r}")

    def _typed(self, key: str, accepted: tuple[type, ...], expected: str) -> Any:
        value = self.data.get(key)
        # JSON's true and false are Python ints too: never a count, an id or a number here.
        if value is not None and (isinstance(value, bool) or not isinstance(value, accepted)):
            raise self._wrong(key, expected)
        return value

    def text(self, key: str) -> str:
        return str(self._typed(key, (str,), "text") or "")

    def integer(self, key: str) -> int | None:
        value: int | None = self._typed(key, (int,), "a whole number")
        return value

    def number(self, key: str) -> float | None:
        value: float | None = self._typed(key, (int, float), "a number")
        return value

    def items(self, key: str, kind: type) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(
            isinstance(item, kind) and not isinstance(item, bool) for item in value
        ):
            raise self._wrong(key, f"a list of {kind.__name__}")
        return value


# --------------------------------------------------------------------------------------
# Resolvers
# --------------------------------------------------------------------------------------


def snapshot_model_config(snapshot: ProfileSnapshot) -> ModelConfig | None:
    """The endpoint row the snapshot names; None if it names none or the row is gone."""
    from agents.models import ModelConfig

    if snapshot.model_config_id is None:
        return None
    return ModelConfig.objects.filter(pk=snapshot.model_config_id).first()


def snapshot_model_name(snapshot: ProfileSnapshot) -> str:
    """The model name runs of this snapshot call (the model client's one answer)."""
    from agents.llm.factory import model_name_for

    return model_name_for(snapshot_model_config(snapshot))
