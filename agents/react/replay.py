"""Replaying a stored run: the tool policy that answers calls from the run's record.

A replay calls the model for real, so the run may go another way than the original did;
what must not happen again is a tool's side effect. ``RecordedCalls`` is the
``ToolPolicy`` (``agents/react/tools.py``) that gives a call the observation the original
run recorded for the same tool with the same arguments (compared as canonical JSON after
the tool has checked them), each recorded call used once, in the order they were made: two
identical calls get the two recorded observations, a third gets none. A call with no
recorded observation left is, by the replay's setting, run when the tool only reads and
needs no approval, or answered as not recorded. The engine never runs a call to a tool that
needs approval under a policy (``AgentExecutor``). Pure Python, like the rest of the engine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from agents.react.tools import Tool, ToolAnswer, ToolInputError
from agents.react.transcript import REPLY_ERRORS
from agents.react.types import (
    ActionStep,
    ErrorStep,
    JsonDict,
    ObservationStep,
    Step,
    ThoughtStep,
)


@dataclass(frozen=True)
class RecordedCall:
    """One tool call of the original run and the observation it got."""

    tool: str
    tool_input: str | JsonDict
    observation: str
    is_error: bool = False
    error_code: str = ""


def recorded_calls(steps: Iterable[Step]) -> list[RecordedCall]:
    """The tool calls among a run's stored steps that got an observation, in order (an
    action, the error step of a failed call, its observation: paired on the call's id)."""
    actions: dict[str, ActionStep] = {}
    errors: dict[str, str] = {}
    last_action = ""
    calls = []
    for step in steps:
        if isinstance(step, ActionStep):
            actions[step.call_id] = step
            last_action = step.call_id
        elif isinstance(step, ErrorStep):
            # The error step of a call comes right before its observation.
            errors[last_action] = step.code
        elif isinstance(step, ObservationStep) and step.call_id in actions:
            action = actions.pop(step.call_id)
            calls.append(
                RecordedCall(
                    tool=action.tool,
                    tool_input=action.tool_input,
                    observation=step.text,
                    is_error=step.is_error,
                    error_code=errors.pop(step.call_id, "") if step.is_error else "",
                )
            )
    return calls


def canonical_arguments(arguments: JsonDict) -> str:
    """Arguments as one text, the same for equal JSON whatever the order of its keys."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class RecordedCalls:
    """The replay's ``ToolPolicy``: the original's observations, each used once, in order."""

    def __init__(self, recorded: Sequence[RecordedCall], *, run_unrecorded_read_only: bool):
        self._unused = list(recorded)
        self.run_unrecorded_read_only = run_unrecorded_read_only

    def answer(self, tool: Tool, arguments: JsonDict) -> ToolAnswer | None:
        recorded = self._take(tool, canonical_arguments(arguments))
        if recorded is not None:
            return ToolAnswer(
                text=recorded.observation,
                is_error=recorded.is_error,
                error_code=recorded.error_code,
            )
        if self.run_unrecorded_read_only and tool.read_only and not tool.needs_approval:
            return None
        return ToolAnswer(not_recorded=True)

    def skip_answered(self, steps: Iterable[Step], resolve: Callable[[str], Tool | None]) -> None:
        """Use up the recorded calls that the replay's own stored steps already answered
        (a replay resumed after its worker died goes on with the next ones)."""
        for call in recorded_calls(steps):
            tool = resolve(call.tool)
            if tool is not None:
                self._take(tool, _recorded_key(tool, call.tool_input))

    def _take(self, tool: Tool, key: str) -> RecordedCall | None:
        name = tool.name.casefold()
        for index, recorded in enumerate(self._unused):
            if recorded.tool.strip().casefold() != name:
                continue
            if _recorded_key(tool, recorded.tool_input) == key:
                return self._unused.pop(index)
        return None


def _recorded_key(tool: Tool, tool_input: str | JsonDict) -> str:
    """A recorded call's arguments as the tool checks them now (an Action Input written as
    text becomes the same arguments as the JSON object); as written if it no longer fits."""
    try:
        return canonical_arguments(tool.coerce_input(tool_input))
    except ToolInputError:
        return canonical_arguments({"": tool_input})


def turn_start(steps: Sequence[Step], index: int) -> int:
    """The index of the first step of the turn that ``steps[index]`` belongs to: a thought,
    an action that follows no thought or action of its own reply, or a reply the engine
    could not use. A fork ("Retry from here") reuses the steps before it and calls the
    model again from there, so no turn is cut between its action and its observation."""
    for position in range(index, -1, -1):
        step = steps[position]
        if isinstance(step, ThoughtStep):
            return position
        if isinstance(step, ErrorStep) and step.code in REPLY_ERRORS:
            return position
        if isinstance(step, ActionStep):
            before = steps[position - 1] if position > 0 else None
            if not isinstance(before, ThoughtStep | ActionStep):
                return position
    return 0
