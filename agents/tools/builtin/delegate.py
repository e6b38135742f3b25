"""``delegate``: hands a task to another agent profile, run as a child run (a sub-agent).

The call starts (or, run again, finds) the child run of this call. If the child has ended,
its answer is the observation; if not, the call suspends the parent's run (``SuspendRun``),
which pauses holding no worker until its children have ended and is then resumed from its
stored steps, when this call runs again and reads the answer (docs/architecture.md,
"Sub-agents").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.react.tools import SuspendRun, current_interrupt
from agents.tools.base import ConfiguredTool, ToolError

KIND = "delegate"

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # The slug of the agent profile that does the task.
        "profile": {"type": "string", "minLength": 1, "maxLength": 50},
    },
    "required": ["profile"],
    "additionalProperties": False,
}


class Delegate(ConfiguredTool):
    """Hands a task to another agent profile and answers with what it found."""

    uses_database = True
    name = "delegate"
    description = (
        "Hands a task to another agent, which works on it with its own tools and answers. "
        "Input: the task, stated fully, since that agent sees nothing else of this chat."
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Set by the run driver for the run this tool belongs to; None outside a stored run.
        self.parent_run_id: int | None = None

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> dict[str, str]:
        from agents.models import AgentProfile

        if not AgentProfile.objects.filter(slug=config["profile"]).exists():
            return {"profile": f"no agent profile has the slug {config['profile']!r}"}
        return {}

    def run(self, task: str) -> str:
        from agents.services.subagents import (
            DelegationRefused,
            child_run_outcome,
            child_run_start,
        )

        interrupt = current_interrupt()
        if self.parent_run_id is None or not interrupt.call_id:
            raise ToolError("a sub-agent can only be started by a stored run")
        try:
            child = child_run_start(
                parent_run_id=self.parent_run_id,
                call_id=interrupt.call_id,
                profile_slug=self.config["profile"],
                task=task,
            )
        except DelegationRefused as refused:
            raise ToolError(str(refused)) from None
        outcome = child_run_outcome(run_id=child.pk)
        if not outcome.ended:
            # The parent waits in the database, not on this thread.
            raise SuspendRun(f"waiting for sub-agent run {child.pk}")
        if outcome.error:
            raise ToolError(outcome.error)
        return outcome.answer
