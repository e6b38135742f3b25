"""``delegate``: hands a task to another agent profile, run as a child run (a sub-agent).

The call starts (or, resumed after a crash, finds) the child run of this call and waits for
it by reading its row, so the wait holds no database connection between reads and ends at
once when the parent is stopped. The child's answer is the observation
(docs/architecture.md, "Sub-agents").
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from django.conf import settings

from agents.react.tools import current_interrupt
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
        # The child may take as long as a run may; the run's own hard limit bounds the wait.
        self.timeout_seconds = float(settings.AGENT_RUN_HARD_LIMIT_SECONDS)
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
        stopped = threading.Event()
        forget = interrupt.on_interrupt(stopped.set)
        try:
            while True:
                outcome = child_run_outcome(run_id=child.pk)
                if outcome.ended:
                    break
                if stopped.wait(settings.AGENT_CANCEL_POLL_SECONDS):
                    raise ToolError("the parent run was stopped")
        finally:
            forget()
        if outcome.error:
            raise ToolError(outcome.error)
        return outcome.answer
