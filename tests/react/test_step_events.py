"""A step's event payload (``step_to_event``) and back (``step_from_event``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from agents.react.types import (
    ActionStep,
    ApprovalDecisionStep,
    ApprovalRequestStep,
    ErrorStep,
    FinalAnswerStep,
    ModeSwitchStep,
    ObservationStep,
    ThoughtStep,
    step_from_event,
    step_to_event,
)

ONE_OF_EACH = [
    ThoughtStep(text="I should add.", prompt_tokens=3, completion_tokens=2, duration_ms=9),
    ActionStep(
        tool="calculator", tool_input={"expression": "2+2", "nested": {"a": [1]}}, call_id="c"
    ),
    ObservationStep(tool="calculator", call_id="c", text="4", truncated=True),
    ErrorStep(code="parse_error", message="no action", model_text="Thought: hm"),
    FinalAnswerStep(text="4", stop_reason="answer"),
    ModeSwitchStep(from_mode="react", to_mode="tools", parse_errors=2),
    ApprovalRequestStep(tool="shell", call_id="c2", tool_input="ls"),
    ApprovalDecisionStep(call_id="c2", approved=False, reason="no"),
]


@pytest.mark.parametrize("step", ONE_OF_EACH, ids=lambda step: step.kind)
def test_the_payload_is_every_field_with_its_kind_and_round_trips(step):
    payload = step_to_event(step)
    # What dataclasses.asdict gave: no step holds a dataclass to convert.
    assert payload == dataclasses.asdict(step)
    assert payload["kind"] == step.kind
    assert step_from_event(json.loads(json.dumps(payload))) == step
