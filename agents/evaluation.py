"""Checking one run against an evaluation case's expectations (``EvalCase``).

Read from what the run stored (``run_log_steps``): the tool calls it made, with their
arguments as canonical JSON (the form ``RecordedCalls`` compares), its answer, and its
model calls and tokens. Each expectation is one ``Check``; the case passes when all do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from django.utils.translation import gettext

from agents.react.replay import canonical_arguments
from agents.react.types import ActionStep, FinalAnswerStep, Step


@dataclass(frozen=True)
class Check:
    expectation: str
    passed: bool
    detail: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunOutcome:
    """What the checks read of one ended run."""

    ended_with_answer: bool
    steps: Sequence[Step]
    model_calls: int
    tokens: int


def expectation_errors(calls: object) -> list[str]:
    """Why a list of tool expectations (``[{"tool", "arguments"}]``) cannot be used."""
    if not isinstance(calls, list):
        return [gettext('Tool expectations are a list of {"tool", "arguments"}.')]
    errors = []
    for item in calls:
        if not isinstance(item, dict) or not isinstance(item.get("tool"), str) or not item["tool"]:
            errors.append(gettext('Each tool expectation needs a "tool" name.'))
            continue
        try:
            re.compile(str(item.get("arguments") or ""))
        except re.error as error:
            errors.append(
                gettext("The argument pattern of %(tool)s is not a regular expression: %(error)s")
                % {"tool": item["tool"], "error": error}
            )
    return errors


def run_checks(
    outcome: RunOutcome,
    *,
    must_call: list[dict[str, Any]],
    must_not_call: list[dict[str, Any]],
    answer_contains: str,
    answer_matches: str,
    max_steps: int | None,
    max_tokens: int | None,
) -> list[Check]:
    """One ``Check`` per expectation, the run's ending with an answer first."""
    calls = [
        (step.tool.strip().casefold(), _arguments_text(step.tool_input))
        for step in outcome.steps
        if isinstance(step, ActionStep)
    ]
    answer = next(
        (step.text for step in reversed(outcome.steps) if isinstance(step, FinalAnswerStep)), ""
    )
    checks = [Check(gettext("The run ends with an answer"), outcome.ended_with_answer)]
    for expected in must_call:
        label = _call_label(gettext("Calls"), expected)
        checks.append(Check(label, _called(calls, expected)))
    for expected in must_not_call:
        label = _call_label(gettext("Does not call"), expected)
        checks.append(Check(label, not _called(calls, expected)))
    if answer_contains:
        checks.append(
            Check(
                gettext("The answer contains “%(text)s”") % {"text": answer_contains},
                answer_contains.casefold() in answer.casefold(),
                answer[:200],
            )
        )
    if answer_matches:
        checks.append(
            Check(
                gettext("The answer matches /%(pattern)s/") % {"pattern": answer_matches},
                re.search(answer_matches, answer) is not None,
                answer[:200],
            )
        )
    if max_steps is not None:
        checks.append(
            Check(
                gettext("At most %(count)s steps") % {"count": max_steps},
                outcome.model_calls <= max_steps,
                gettext("%(count)s steps") % {"count": outcome.model_calls},
            )
        )
    if max_tokens is not None:
        checks.append(
            Check(
                gettext("At most %(count)s tokens") % {"count": max_tokens},
                outcome.tokens <= max_tokens,
                gettext("%(count)s tokens") % {"count": outcome.tokens},
            )
        )
    return checks


def _arguments_text(tool_input: object) -> str:
    return canonical_arguments(tool_input) if isinstance(tool_input, dict) else str(tool_input)


def _called(calls: list[tuple[str, str]], expected: dict[str, Any]) -> bool:
    name = str(expected["tool"]).strip().casefold()
    pattern = str(expected.get("arguments") or "")
    return any(tool == name and re.search(pattern, arguments) for tool, arguments in calls)


def _call_label(verb: str, expected: dict[str, Any]) -> str:
    pattern = expected.get("arguments") or ""
    return f"{verb} {expected['tool']}" + (f" /{pattern}/" if pattern else "")
