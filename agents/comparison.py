"""A stored run and its replay, step by step, with what differs marked (for staff).

The steps of both runs (thoughts, actions with their input, observations, errors, the
answer; model call records are left out, their tokens are on the thoughts) are aligned by
``difflib.SequenceMatcher`` on their kind and text, so a step the replay added or dropped
shows against a gap; a step that changed has its text diffed word by word.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from agents.models import AgentRun
from agents.react.types import (
    ActionStep,
    ApprovalDecisionStep,
    ApprovalRequestStep,
    ErrorStep,
    FinalAnswerStep,
    ModelCallRecord,
    ModeSwitchStep,
    ObservationStep,
    Step,
    ThoughtStep,
)
from agents.runs.reads import run_log_steps

_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


@dataclass(frozen=True)
class ComparedStep:
    kind: str
    text: str
    tokens: int | None = None
    duration_ms: int | None = None


@dataclass(frozen=True)
class Segment:
    """A piece of a step's text: ``equal``, or ``changed`` (not in the other side's step)."""

    op: str
    text: str


@dataclass(frozen=True)
class ComparedRow:
    original: ComparedStep | None
    replay: ComparedStep | None
    same: bool
    original_segments: list[Segment] = field(default_factory=list)
    replay_segments: list[Segment] = field(default_factory=list)


def run_steps_compared(*, original: AgentRun, replay: AgentRun) -> list[ComparedRow]:
    """The two runs' steps side by side, in order."""
    left = [shown for step in run_log_steps(run=original) if (shown := _shown(step))]
    right = [shown for step in run_log_steps(run=replay) if (shown := _shown(step))]
    return steps_compared(left, right)


def steps_compared(left: list[ComparedStep], right: list[ComparedStep]) -> list[ComparedRow]:
    matcher = difflib.SequenceMatcher(
        None, [(s.kind, s.text) for s in left], [(s.kind, s.text) for s in right], autojunk=False
    )
    rows: list[ComparedRow] = []
    for op, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        if op == "equal":
            for a, b in zip(left[a_start:a_end], right[b_start:b_end], strict=True):
                same = [Segment("equal", a.text)]
                rows.append(ComparedRow(a, b, True, same, [Segment("equal", b.text)]))
            continue
        rows.extend(_changed(left[a_start:a_end], right[b_start:b_end]))
    return rows


def _changed(left: list[ComparedStep], right: list[ComparedStep]) -> list[ComparedRow]:
    """Steps that differ: those of the same kind in the same place face each other (their
    texts diffed), the others face a gap."""
    matcher = difflib.SequenceMatcher(
        None, [s.kind for s in left], [s.kind for s in right], autojunk=False
    )
    rows = []
    for op, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        pairs: list[tuple[ComparedStep | None, ComparedStep | None]]
        if op == "equal":
            pairs = list(zip(left[a_start:a_end], right[b_start:b_end], strict=True))
        else:
            pairs = [(a, None) for a in left[a_start:a_end]]
            pairs += [(None, b) for b in right[b_start:b_end]]
        for a, b in pairs:
            a_segments, b_segments = _text_diff(a, b)
            same = a is not None and b is not None and a.text == b.text
            rows.append(ComparedRow(a, b, same, a_segments, b_segments))
    return rows


def _text_diff(
    a: ComparedStep | None, b: ComparedStep | None
) -> tuple[list[Segment], list[Segment]]:
    if a is None or b is None or a.kind != b.kind:
        return (
            [Segment("changed", a.text)] if a else [],
            [Segment("changed", b.text)] if b else [],
        )
    a_words, b_words = _WORDS.findall(a.text), _WORDS.findall(b.text)
    matcher = difflib.SequenceMatcher(None, a_words, b_words, autojunk=False)
    a_segments: list[Segment] = []
    b_segments: list[Segment] = []
    for op, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        kind = "equal" if op == "equal" else "changed"
        if a_end > a_start:
            a_segments.append(Segment(kind, "".join(a_words[a_start:a_end])))
        if b_end > b_start:
            b_segments.append(Segment(kind, "".join(b_words[b_start:b_end])))
    return a_segments, b_segments


def _shown(step: Step) -> ComparedStep | None:
    if isinstance(step, ThoughtStep):
        tokens = step.prompt_tokens + step.completion_tokens
        return ComparedStep("thought", step.text, tokens, step.duration_ms)
    if isinstance(step, ActionStep):
        return ComparedStep("action", f"{step.tool} {_input_text(step.tool_input)}")
    if isinstance(step, ObservationStep):
        return ComparedStep("observation", step.text, None, step.duration_ms)
    if isinstance(step, ErrorStep):
        return ComparedStep("error", f"{step.code}: {step.message}")
    if isinstance(step, FinalAnswerStep):
        # Its tokens and time are the whole run's: the page shows them with the run.
        return ComparedStep("final_answer", step.text)
    if isinstance(step, ModeSwitchStep):
        return ComparedStep("mode_switch", f"{step.from_mode} → {step.to_mode}")
    if isinstance(step, ApprovalRequestStep):
        return ComparedStep("approval_request", f"{step.tool} {_input_text(step.tool_input)}")
    if isinstance(step, ApprovalDecisionStep):
        return ComparedStep("approval_decision", "approved" if step.approved else "declined")
    assert isinstance(step, ModelCallRecord)
    return None


def _input_text(tool_input: object) -> str:
    """An action's input as one text: a JSON object (or text that is one) with sorted keys
    and even spacing, so that neither makes two calls with the same arguments differ."""
    if isinstance(tool_input, str):
        try:
            parsed = json.loads(tool_input)
        except ValueError:
            return tool_input
        if not isinstance(parsed, dict):
            return tool_input
        tool_input = parsed
    return json.dumps(tool_input, sort_keys=True, ensure_ascii=False)
