"""From a frozen profile (``ProfileSnapshot``, ``agents/profile_snapshot.py``) to an engine.

The snapshot decides everything: the model endpoint, the tools, the prompt and the limits.
Only the rows it points at are read here, so a run keeps behaving as its profile version
did even after staff edit the profile (docs/architecture.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from agents.llm.factory import chat_model_for, misconfigured
from agents.models import ModelConfig, ToolConfig
from agents.profile_snapshot import ProfileSnapshot, snapshot_model_config
from agents.react.executor import AgentConfig, AgentExecutor, RunBudget
from agents.react.prompt import PromptConfig
from agents.react.tools import Tool, ToolPolicy
from agents.react.types import ChatModel, ThoughtDelta
from agents.selectors import tool_configs_enabled
from agents.tools.registry import build_tools

logger = logging.getLogger(__name__)


def build_executor(
    *,
    snapshot: ProfileSnapshot,
    user: Any,
    conversation: Any = None,
    should_cancel: Callable[[], bool] | None = None,
    on_answer_delta: Callable[[str], None] | None = None,
    on_answer_reset: Callable[[], None] | None = None,
    on_thought_delta: Callable[[ThoughtDelta], None] | None = None,
    budget_grants: int = 0,
    model_config: ModelConfig | None = None,
    tool_configs: list[ToolConfig] | None = None,
    extra_tools: Sequence[Tool] = (),
    tool_policy: ToolPolicy | None = None,
    user_instructions: str = "",
) -> AgentExecutor:
    """An ``AgentExecutor`` for the profile version ``snapshot``.

    ``budget_grants`` is how many times the run's owner pressed Continue: each adds the
    profile's budgets once more. ``model_config``: the snapshot's endpoint row if the caller
    read it already (a run's claim reads it with the run); otherwise it is read here.
    ``tool_configs``: the enabled tool rows among the snapshot's, if the caller read them
    (the claim does, on PostgreSQL); otherwise they are read here. ``tool_policy``: which
    calls run (a replay's, ``agents/react/replay.py``); None runs every call.
    ``user_instructions``: the owner's custom instructions, added to every prompt.

    A model endpoint that is gone or unusable does not raise here: the run's first model
    call raises ``ModelError`` (code ``model_misconfigured``), like any model failure.
    """
    if model_config is None:
        # Read once: the model and its abilities.
        model_config = snapshot_model_config(snapshot)
    return executor_for(
        snapshot=snapshot,
        model=_chat_model(snapshot, model_config),
        tool_configs=snapshot_tool_configs(snapshot, enabled=tool_configs),
        user=user,
        conversation=conversation,
        should_cancel=should_cancel,
        on_answer_delta=on_answer_delta,
        on_answer_reset=on_answer_reset,
        on_thought_delta=on_thought_delta,
        supports_tool_calling=bool(model_config and model_config.supports_tool_calling),
        budget_grants=budget_grants,
        extra_tools=extra_tools,
        tool_policy=tool_policy,
        user_instructions=user_instructions,
    )


def executor_for(
    *,
    snapshot: ProfileSnapshot,
    model: ChatModel,
    tool_configs: Iterable[ToolConfig],
    user: Any,
    conversation: Any = None,
    should_cancel: Callable[[], bool] | None = None,
    on_answer_delta: Callable[[str], None] | None = None,
    on_answer_reset: Callable[[], None] | None = None,
    on_thought_delta: Callable[[ThoughtDelta], None] | None = None,
    supports_tool_calling: bool = False,
    budget_grants: int = 0,
    extra_tools: Sequence[Tool] = (),
    tool_policy: ToolPolicy | None = None,
    user_instructions: str = "",
) -> AgentExecutor:
    """The executor for ``snapshot`` with the model and tool rows already chosen;
    ``extra_tools``: tools the run gets beside the profile's (the attachment tools), left out
    where the profile has a tool of the same name."""
    tools: list[Tool] = list(build_tools(tool_configs, user=user, conversation=conversation))
    names = {tool.name for tool in tools}
    tools.extend(tool for tool in extra_tools if tool.name not in names)
    return AgentExecutor(
        model=model,
        tools=tools,
        prompt=prompt_config(snapshot, user_instructions=user_instructions),
        config=agent_config(
            snapshot, supports_tool_calling=supports_tool_calling, budget_grants=budget_grants
        ),
        should_cancel=should_cancel,
        on_answer_delta=on_answer_delta,
        on_answer_reset=on_answer_reset,
        on_thought_delta=on_thought_delta,
        tool_policy=tool_policy,
    )


def snapshot_chat_model(snapshot: ProfileSnapshot) -> ChatModel:
    return _chat_model(snapshot, snapshot_model_config(snapshot))


def _chat_model(snapshot: ProfileSnapshot, model_config: ModelConfig | None) -> ChatModel:
    if model_config is None and snapshot.model_config_id is not None:
        return misconfigured(
            f"The model endpoint of profile {snapshot.slug or '?'!r} "
            f"(id {snapshot.model_config_id}) no longer exists; choose another in the admin."
        )
    return chat_model_for(model_config)


def snapshot_tool_configs(
    snapshot: ProfileSnapshot, *, enabled: list[ToolConfig] | None = None
) -> list[ToolConfig]:
    """The snapshot's tools that still exist and are enabled, in the snapshot's order;
    ``enabled``: those rows, if the caller read them already (in any order)."""
    tool_ids = snapshot.tool_ids
    if enabled is None:
        enabled = tool_configs_enabled(ids=list(tool_ids))
    rows = {row.pk: row for row in enabled}
    missing = [tool_id for tool_id in tool_ids if tool_id not in rows]
    if missing:
        logger.info("profile %s: tools %s are gone or disabled", snapshot.slug, missing)
    return [rows[tool_id] for tool_id in tool_ids if tool_id in rows]


def prompt_config(snapshot: ProfileSnapshot, *, user_instructions: str = "") -> PromptConfig:
    return PromptConfig(
        mode=snapshot.mode,
        label_set=snapshot.label_set,
        template=snapshot.system_prompt,
        few_shot_examples=snapshot.few_shot_examples,
        user_instructions=user_instructions,
    )


def agent_config(
    snapshot: ProfileSnapshot, *, supports_tool_calling: bool = False, budget_grants: int = 0
) -> AgentConfig:
    return AgentConfig(
        max_iterations=snapshot.max_iterations,
        max_execution_time=snapshot.max_execution_time,
        temperature=snapshot.temperature,
        supports_tool_calling=supports_tool_calling,
        budget=run_budget(snapshot, budget_grants=budget_grants),
    )


def run_budget(snapshot: ProfileSnapshot, *, budget_grants: int = 0) -> RunBudget | None:
    """The profile's budgets, each times one plus the Continues granted; None if it has none."""
    if not (snapshot.budget_steps or snapshot.budget_tokens or snapshot.budget_tool_calls):
        return None
    times = 1 + budget_grants
    return RunBudget(
        steps=snapshot.budget_steps * times if snapshot.budget_steps else None,
        tokens=snapshot.budget_tokens * times if snapshot.budget_tokens else None,
        tool_calls={name: limit * times for name, limit in snapshot.budget_tool_calls.items()},
    )
