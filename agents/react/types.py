"""The engine's vocabulary: the steps a run yields and the model interface it calls.

Pure Python. Every step turns into the payload of a ``step`` event (``to_event``) and back
(``step_from_event``), so a run can be stored, pushed to a browser, printed by ``ask --json``
and resumed after a crash from the same shapes (docs/protocol.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol, cast

JsonDict = dict[str, Any]
ChatMessage = dict[str, Any]  # OpenAI chat format: {"role": ..., "content": ..., ...}


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for, natively or parsed from ReAct text."""

    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it (native mode) or the Action Input


@dataclass(frozen=True)
class Completion:
    """What one model call returned."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    duration_ms: int = 0


class ChatModel(Protocol):
    """The one interface the engine calls. ``agents/llm`` implements it with the openai SDK.

    ``on_text`` receives text deltas as they stream in; it may raise (for example to cancel),
    and the implementation must let that exception propagate after closing the stream.
    """

    model_name: str

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        stop: list[str] | None = None,
        tools: list[JsonDict] | None = None,
        temperature: float | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion: ...


@dataclass(frozen=True)
class ThoughtDelta:
    """A piece of the thought a model call is writing, passed on as it streams (not stored).

    A call's deltas share its ``call_index`` (the ``ModelCallRecord.index`` it will get) and
    come in order: the first has ``offset`` 0 (the thought starts), each next one's
    ``offset`` is the length of the text sent before it, and the last has ``done`` True
    (its ``text`` may be empty). See ``AgentExecutor`` for when they come.
    """

    call_index: int
    offset: int
    text: str
    done: bool = False


# --------------------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------------------

StopReason = Literal["answer", "return_direct", "max_iterations", "max_execution_time"]


@dataclass(frozen=True)
class ThoughtStep:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_ms: int = 0
    kind: Literal["thought"] = "thought"


@dataclass(frozen=True)
class ActionStep:
    """One tool call the engine will run. ``call_id`` is the engine's own, unique within the
    run: approvals and observations are matched on it. ``model_call_id`` is the id the model
    gave a native call, kept only to pair the tool's result with the call in the messages
    sent back to the model; it decides nothing."""

    tool: str
    tool_input: str | JsonDict
    call_id: str
    kind: Literal["action"] = "action"
    model_call_id: str = ""


@dataclass(frozen=True)
class ObservationStep:
    tool: str
    call_id: str
    text: str
    is_error: bool = False
    truncated: bool = False
    duration_ms: int = 0
    kind: Literal["observation"] = "observation"


@dataclass(frozen=True)
class ErrorStep:
    """Something went wrong that the model is told about and may recover from."""

    # parse_error | empty_reply | repeated_call_id | unknown_tool | invalid_arguments |
    # tool_error | tool_timeout | declined | approval_mismatch
    code: str
    message: str
    kind: Literal["error"] = "error"
    # For parse_error / empty_reply: the model's text (invented observations cut off), kept so
    # that a resumed run shows the model the same scratchpad.
    model_text: str = ""


@dataclass(frozen=True)
class FinalAnswerStep:
    text: str
    stop_reason: StopReason = "answer"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_ms: int = 0
    kind: Literal["final_answer"] = "final_answer"


@dataclass(frozen=True)
class ModeSwitchStep:
    """The run goes on in another prompt mode from here (format repair that adapts).

    Yielded after the ``PARSE_ERRORS_BEFORE_NATIVE``-th parse error of a ReAct run whose
    model supports native tool calling (``AgentConfig.supports_tool_calling``): the next
    model call uses native tool calling, with the same question, history and steps so far.
    """

    from_mode: str  # "react"
    to_mode: str  # "tools"
    reason: str = "parse_errors"
    parse_errors: int = 0  # parse errors of this run when it switched
    kind: Literal["mode_switch"] = "mode_switch"


@dataclass(frozen=True)
class ApprovalRequestStep:
    """A tool call that waits for a person's decision before it runs (the tool is marked
    ``needs_approval``). Yielded just before the engine raises ``AwaitingApproval``.

    ``tool`` and ``tool_input`` are exactly the call that will run: a decision on this
    request applies only to the action with the same ``call_id``, tool and arguments."""

    tool: str
    call_id: str
    tool_input: str | JsonDict
    kind: Literal["approval_request"] = "approval_request"


@dataclass(frozen=True)
class ApprovalDecisionStep:
    """The decision on an ``ApprovalRequestStep``, handed back in ``prior_steps``: an approved
    call runs once, a declined one becomes an observation saying so (with the reason). It is
    bound to the request of its ``call_id``, and through it to that call's tool and
    arguments (``Transcript.decision_for``)."""

    call_id: str
    approved: bool
    reason: str = ""
    kind: Literal["approval_decision"] = "approval_decision"


@dataclass(frozen=True)
class ModelCallRecord:
    """The exact request and response of one model call (stored for the inspector, not sent)."""

    index: int
    messages: list[ChatMessage]
    options: JsonDict
    response_text: str
    tool_calls: list[JsonDict] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_ms: int = 0
    error: str = ""
    kind: Literal["model_call"] = "model_call"


Step = (
    ThoughtStep
    | ActionStep
    | ObservationStep
    | ErrorStep
    | FinalAnswerStep
    | ModeSwitchStep
    | ModelCallRecord
    | ApprovalRequestStep
    | ApprovalDecisionStep
)

_STEP_CLASSES: dict[str, type] = {
    "thought": ThoughtStep,
    "action": ActionStep,
    "observation": ObservationStep,
    "error": ErrorStep,
    "final_answer": FinalAnswerStep,
    "mode_switch": ModeSwitchStep,
    "model_call": ModelCallRecord,
    "approval_request": ApprovalRequestStep,
    "approval_decision": ApprovalDecisionStep,
}


def step_to_event(step: Step) -> JsonDict:
    """The JSON payload of a step event (``kind`` plus the step's fields).

    Its values are the step's own, not copies (``dataclasses.asdict`` deep-copied each: a
    tenth of a stored step's time in a profile of the worker). Steps are frozen, no step
    holds another dataclass, and nothing edits a payload's dicts: callers serialise it or
    read it.
    """
    step_class: type = type(step)  # as ``type``, which mypy knows is hashable
    return {name: getattr(step, name) for name in _field_names(step_class)}


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in fields(cls))


def step_from_event(payload: JsonDict) -> Step:
    cls = _STEP_CLASSES[payload["kind"]]
    names = {field.name for field in fields(cls)}
    return cast(Step, cls(**{k: v for k, v in payload.items() if k in names}))
