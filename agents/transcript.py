"""A conversation as a read-only transcript, built from its stored frames.

The shared page (``agents/views.py``) shows what the owner's chat page shows, from the same
log (docs/protocol.md): each question, each run's steps, and each answer's server-sanitised
HTML (``agents/rendering.py``). Nothing else about the owner reaches it. Any tool secret
value that found its way into a step or an answer is blanked here as well, though tools
already redact their own output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext, gettext_noop

from agents.protocol import FrameType
from agents.redaction import Redactor

if TYPE_CHECKING:
    from agents.selectors import BranchView


# A failed run's message is stored in English by the worker (agents/llm/errors.py); like the
# chat page (static/js/thread.js), the shared page says it in its own language by the code,
# keeping the reference staff look up. Where the page is English the stored words stay.
FAILURE_REASONS = {
    "model_auth": gettext_noop(
        "The AI model service did not accept this site's credentials. "
        "The site's staff can fix this."
    ),
    "model_misconfigured": gettext_noop(
        "The AI model is not set up correctly. The site's staff can fix this."
    ),
    "model_quota": gettext_noop(
        "The AI model service has used up this site's quota. The site's staff can fix this."
    ),
    "model_rate_limited": gettext_noop(
        "The AI model service is too busy right now. Please try again in a little while."
    ),
    "model_unavailable": gettext_noop(
        "The AI model's server could not be reached. Please try again in a little while."
    ),
    "model_server_error": gettext_noop(
        "The AI model's server reported an error. Please try again in a little while."
    ),
    "model_timeout": gettext_noop(
        "The AI model took too long to answer. Please try again in a little while."
    ),
    "model_bad_response": gettext_noop(
        "The AI model sent an answer that could not be used. Please try again in a little while."
    ),
    "too_many_attempts": gettext_noop("The run was interrupted too many times and was given up."),
    "no_profile": gettext_noop("The agent this run used was deleted."),
    "internal_error": gettext_noop("The agent stopped because of an internal error."),
    "run_timeout": gettext_noop("The run took too long and was stopped."),
}
_REFERENCE = re.compile(r"\(Reference: ([^)]+?)\.\)")
_RUN_REFERENCE = re.compile(r"run (\d+)")


def failure_note(code: str, stored: str) -> str:
    """A failed run's reason in the active language, with the stored message's reference."""
    reason = FAILURE_REASONS.get(code)
    translated = gettext(reason) if reason else ""
    if not translated or translated == reason:
        return stored or gettext("The run failed.")
    reference = _REFERENCE.search(stored)
    if reference is None:
        return translated
    # The worker writes "run 12" (agents/llm/errors.py): the word is said in this language.
    run = _RUN_REFERENCE.fullmatch(reference[1])
    label = gettext("run %s") % run[1] if run else reference[1]
    return f"{translated} " + gettext("(Reference: %s.)") % label


@dataclass
class TranscriptStep:
    kind: str  # thought, action, observation, error
    text: str
    tool: str = ""
    is_error: bool = False


@dataclass
class TranscriptTurn:
    role: str  # user or assistant
    text: str = ""  # a question, or a stopped run's partial answer
    html: str = ""  # a finished answer, sanitised on the server
    steps: list[TranscriptStep] = field(default_factory=list)
    status: str = "running"  # of an assistant turn: running, succeeded, failed, cancelled
    note: str = ""


def transcript(
    frames: Iterable[dict[str, Any]],
    *,
    secrets: Sequence[str] = (),
    branch: BranchView | None = None,
    hidden_tools: Collection[str] = (),
) -> list[TranscriptTurn]:
    """The turns of a conversation, in log order, from its stored frames; with ``branch``,
    only the questions and runs the active branch shows (the log holds every branch).

    The observations of ``hidden_tools`` (tools that read the owner's other conversations)
    are replaced by a note saying so: a share shows this conversation, nothing else."""
    turns: list[TranscriptTurn] = []
    runs: dict[int, TranscriptTurn] = {}
    hidden = {name.strip().casefold() for name in hidden_tools}

    # Matches a secret however it was encoded, HTML-escaped in an answer's html included.
    blank = Redactor(secrets)

    def run_turn(run_id: int) -> TranscriptTurn:
        if run_id not in runs:
            runs[run_id] = TranscriptTurn(role="assistant")
            turns.append(runs[run_id])
        return runs[run_id]

    for frame in frames:
        kind = frame.get("type")
        run_id = frame.get("run_id")
        if branch is not None and run_id is not None and run_id not in branch.run_ids:
            run_id = None  # a run of another branch; its question is left out below
        if kind == FrameType.MESSAGE_CREATED:
            message = frame.get("message") or {}
            if branch is not None and message.get("id") not in branch.message_ids:
                continue
            if message.get("role") == "user":
                turns.append(TranscriptTurn(role="user", text=blank(message.get("content", ""))))
                if run_id is not None:
                    run_turn(run_id)
        elif run_id is None:
            continue
        elif kind == FrameType.STEP:
            step = _step(frame, blank)
            if step.kind == "observation" and step.tool.strip().casefold() in hidden:
                step.text = gettext("(Not shown: this tool read the owner's other conversations.)")
            run_turn(run_id).steps.append(step)
        elif kind == FrameType.RUN_FINISHED:
            turn = run_turn(run_id)
            turn.status = "succeeded"
            turn.html = blank((frame.get("message") or {}).get("html", ""))
        elif kind == FrameType.RUN_FAILED:
            turn = run_turn(run_id)
            turn.status = "failed"
            turn.note = blank(
                failure_note(str(frame.get("code") or ""), str(frame.get("message") or ""))
            )
        elif kind == FrameType.RUN_CANCELLED:
            turn = run_turn(run_id)
            turn.status = "cancelled"
            message = frame.get("message") or {}
            turn.html = blank(message.get("html", ""))
            turn.text = "" if turn.html else blank(frame.get("partial_answer") or "")
            turn.note = gettext("Stopped before it finished.")
    return turns


def _step(frame: dict[str, Any], blank: Redactor) -> TranscriptStep:
    kind = str(frame.get("kind", ""))
    if kind == "action":
        tool_input = frame.get("tool_input", "")
        text = (
            tool_input
            if isinstance(tool_input, str)
            else json.dumps(tool_input, indent=2, ensure_ascii=False)
        )
    elif kind == "error":
        text = str(frame.get("message", ""))
    else:
        text = str(frame.get("text", ""))
    return TranscriptStep(
        kind=kind,
        text=blank(text),
        tool=str(frame.get("tool") or frame.get("code") or ""),
        is_error=bool(frame.get("is_error")),
    )
