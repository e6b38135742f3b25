"""The steps of a run so far, grouped into turns, and how the model is shown them.

A turn is one model reply that did not end the run: an action (ReAct mode), one or more tool
calls (native mode), or a reply that could not be used. Live runs and resumed runs build the
same turns, from the same steps, so a resumed run shows the model exactly the scratchpad the
crashed run would have shown it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from agents.react import jsontext
from agents.react.labels import LabelSet
from agents.react.types import (
    ActionStep,
    ApprovalDecisionStep,
    ApprovalRequestStep,
    ChatMessage,
    ErrorStep,
    FinalAnswerStep,
    JsonDict,
    ModelCallRecord,
    ModeSwitchStep,
    ObservationStep,
    Step,
    ThoughtStep,
)

# Error codes of replies that could not be used (as opposed to failed tool calls).
REPLY_ERRORS = frozenset({"parse_error", "empty_reply", "repeated_call_id"})


@dataclass
class ToolRun:
    action: ActionStep
    observation: ObservationStep | None = None


@dataclass
class Turn:
    thought: str = ""
    runs: list[ToolRun] = field(default_factory=list)
    # A reply that could not be used: what the model wrote, and what it was told.
    invalid_text: str | None = None
    correction: str = ""

    @property
    def pending(self) -> list[ToolRun]:
        return [run for run in self.runs if run.observation is None]


@dataclass
class Transcript:
    turns: list[Turn] = field(default_factory=list)
    final: FinalAnswerStep | None = None
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    last_error: ErrorStep | None = None  # of the last unusable reply
    parse_errors: int = 0
    mode_switch: ModeSwitchStep | None = None
    # Approval before side effects: the calls a person was asked about (the first request
    # for a call id is the one a decision answers), and their decisions.
    requests: dict[str, ApprovalRequestStep] = field(default_factory=dict)
    decisions: dict[str, ApprovalDecisionStep] = field(default_factory=dict)

    def request_for(self, call_id: str, tool: str, tool_input: str | JsonDict) -> str:
        """Whether the person was asked about this exact call: ``"asked"``, ``"no"``, or
        ``"other"`` when the request under ``call_id`` showed another tool or arguments."""
        request = self.requests.get(call_id)
        if request is None:
            return "no"
        same = request.tool == tool and same_arguments(request.tool_input, tool_input)
        return "asked" if same else "other"

    def decision_for(
        self, call_id: str, tool: str, tool_input: str | JsonDict
    ) -> ApprovalDecisionStep | None:
        """The decision on this exact call: one taken on a request that showed the same tool
        and arguments (docs/architecture.md, "Pauses"); None otherwise."""
        if self.request_for(call_id, tool, tool_input) != "asked":
            return None
        return self.decisions.get(call_id)

    @property
    def action_count(self) -> int:
        return sum(len(turn.runs) for turn in self.turns)

    def calls_run(self, tool: str) -> int:
        """How many calls to ``tool`` ran (have an observation) and were not declined."""
        return sum(
            1
            for turn in self.turns
            for run in turn.runs
            if run.action.tool == tool
            and run.observation is not None
            and (
                run.action.call_id not in self.decisions
                or self.decisions[run.action.call_id].approved
            )
        )


def transcript_from_steps(steps: Iterable[Step]) -> Transcript:
    """Group stored steps into turns.

    A thought starts a turn; an action starts one unless it belongs to the current turn's
    batch of calls (no observation seen yet in that turn); an observation finds its action by
    ``call_id``; a parse error starts a turn and the observation after it is its correction.
    """
    transcript = Transcript()
    turns = transcript.turns
    for step in steps:
        if isinstance(step, ModelCallRecord):
            transcript.model_calls += 1
            transcript.prompt_tokens += step.prompt_tokens
            transcript.completion_tokens += step.completion_tokens
        elif isinstance(step, ThoughtStep):
            turns.append(Turn(thought=step.text))
        elif isinstance(step, ActionStep):
            current = turns[-1] if turns else None
            if (
                current is None
                or current.invalid_text is not None
                or any(run.observation is not None for run in current.runs)
            ):
                current = Turn()
                turns.append(current)
            current.runs.append(ToolRun(action=step))
        elif isinstance(step, ObservationStep):
            _attach_observation(turns, step)
        elif isinstance(step, ErrorStep) and step.code in REPLY_ERRORS:
            turns.append(Turn(invalid_text=step.model_text))
            transcript.last_error = step
            transcript.parse_errors += step.code == "parse_error"
        elif isinstance(step, ModeSwitchStep):
            transcript.mode_switch = step
        elif isinstance(step, ApprovalRequestStep):
            transcript.requests.setdefault(step.call_id, step)
        elif isinstance(step, ApprovalDecisionStep):
            transcript.decisions[step.call_id] = step
        elif isinstance(step, FinalAnswerStep):
            transcript.final = step
    transcript.model_calls = max(transcript.model_calls, len(turns))
    return transcript


def _attach_observation(turns: list[Turn], step: ObservationStep) -> None:
    if not turns:
        return
    current = turns[-1]
    for run in current.runs:
        if run.action.call_id == step.call_id and run.observation is None:
            run.observation = step
            return
    if current.invalid_text is not None and not current.correction:
        current.correction = step.text


def canonical_arguments(tool_input: str | JsonDict) -> str:
    """A call's arguments as one text: JSON with sorted keys for a dict, else as written."""
    if isinstance(tool_input, dict):
        return json.dumps(tool_input, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return tool_input


def same_arguments(shown: str | JsonDict, called: str | JsonDict) -> bool:
    return type(shown) is type(called) and canonical_arguments(shown) == canonical_arguments(called)


def tool_input_text(tool_input: str | JsonDict) -> str:
    if isinstance(tool_input, str):
        return tool_input
    return json.dumps(tool_input, ensure_ascii=False)


def react_scratchpad(turns: Iterable[Turn], labels: LabelSet) -> str:
    """The text after the prompt's last ``Thought:``, for the next model call."""
    lead = " " if labels.colon == ":" else ""
    scratchpad = ""
    for turn in turns:
        if turn.invalid_text is not None:
            lines = [labels.line("observation", turn.correction)]
            said = turn.invalid_text.strip()
        else:
            lines = []
            for run in turn.runs:
                observation = run.observation.text if run.observation else ""
                lines.append(labels.line("action", run.action.tool))
                lines.append(labels.line("action_input", tool_input_text(run.action.tool_input)))
                lines.append(labels.line("observation", observation))
            said = turn.thought.strip()
        opening = f"{lead}{said}" if said else ""
        scratchpad += "\n".join([opening, *lines, labels.line("thought")])
    return scratchpad


def native_messages(turns: Iterable[Turn]) -> list[ChatMessage]:
    """The assistant tool-call messages and tool results, for native tool calling."""
    messages: list[ChatMessage] = []
    for turn in turns:
        if turn.invalid_text is not None:
            messages.append({"role": "assistant", "content": turn.invalid_text})
            messages.append({"role": "user", "content": turn.correction})
            continue
        messages.append(
            {
                "role": "assistant",
                "content": turn.thought or None,
                "tool_calls": [
                    {
                        "id": _id_for_model(run.action),
                        "type": "function",
                        "function": {
                            "name": run.action.tool,
                            "arguments": _arguments_json(run.action.tool_input),
                        },
                    }
                    for run in turn.runs
                ],
            }
        )
        for run in turn.runs:
            content = run.observation.text if run.observation else ""
            call_id = _id_for_model(run.action)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return messages


def _id_for_model(action: ActionStep) -> str:
    """The id the model gave the call (some servers check that ids look like their own), or
    the engine's when it gave none. The model's ids are unique within a reply (a reply that
    repeats one is refused), which is all the pairing needs."""
    return action.model_call_id or action.call_id


def _arguments_json(tool_input: str | JsonDict) -> str:
    """Arguments to send back as JSON. Some servers (Ollama, vLLM) refuse a request whose
    history holds arguments that are not a JSON object, so invalid ones go back as ``{}``;
    the tool's observation quotes what the model wrote; so do empty ones, which are not JSON
    at all."""
    if isinstance(tool_input, dict):
        return json.dumps(tool_input, ensure_ascii=False)
    try:
        parsed = jsontext.loads(tool_input)
    except ValueError:
        return "{}"
    return tool_input if isinstance(parsed, dict) else "{}"
