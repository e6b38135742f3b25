"""The wire protocol of the socket and the JSON API (docs/protocol.md), in one place.

What a client can rely on lives here: the frame types, the shape of every frame the server
builds, the limits a client frame must respect, and the codes a refusal can carry. Sending
the frames is ``agents/events.py``'s job (published) and ``agents/consumers.py``'s (direct
answers); this module only says what they look like.
"""

from __future__ import annotations

import math
from datetime import timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings

from agents.db.rows import StoredEvent
from agents.models import (
    AgentRun,
    EvalResult,
    EvalRun,
    MemorySummary,
    Message,
    Notification,
    RunEvent,
    ToolApproval,
)
from agents.rendering import render_markdown


class FrameType(StrEnum):
    """Every frame's ``type``; members compare and serialise as the plain strings."""

    # Client → server.
    MESSAGE_SEND = "message.send"
    RUN_CANCEL = "run.cancel"
    RESUME = "resume"
    PING = "ping"
    APPROVAL_DECIDE = "approval.decide"
    RUN_CONTINUE = "run.continue"
    # Server → client, stored in the log with a ``seq``.
    MESSAGE_CREATED = "message.created"
    RUN_STARTED = "run.started"
    STEP = "step"
    RUN_FINISHED = "run.finished"
    RUN_FAILED = "run.failed"
    RUN_CANCELLED = "run.cancelled"
    # The run paused for a person (docs/protocol.md, "Approval and budgets").
    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_DECIDED = "approval.decided"
    RUN_BUDGET_REACHED = "run.budget_reached"
    RUN_CONTINUED = "run.continued"
    # The run paused until its sub-agents end (docs/protocol.md, "run.waiting").
    RUN_WAITING = "run.waiting"
    # Server → client, ephemeral (no ``seq``); the live text ones are built in agents/live.py.
    THOUGHT_DELTA = "thought.delta"
    ANSWER_DELTA = "answer.delta"
    MEMORY_SUMMARIZED = "memory.summarized"
    ERROR = "error"
    PONG = "pong"
    # Server → client on the notifications socket (`/ws/notifications/`), not stored in a
    # conversation's log: the Notification row is their record.
    NOTIFICATION = "notification"
    NOTIFICATIONS_UNREAD = "notifications.unread"
    # Server → client on an evaluation's socket (`/ws/evaluations/<id>/`), for staff: the
    # EvalRun and EvalResult rows are the record.
    EVALUATION_PROGRESS = "evaluation.progress"
    # A monthly budget the user is under passed its warning share or was used up.
    BUDGET_WARNING = "budget.warning"


# The frames that end a run; nothing of that run follows them.
TERMINAL_FRAME_TYPES = frozenset(
    {FrameType.RUN_FINISHED, FrameType.RUN_FAILED, FrameType.RUN_CANCELLED}
)


class RefusalCode(StrEnum):
    """Why a client frame or an API request was not acted on (docs/protocol.md, ``error``)."""

    # The frame itself (socket only).
    INVALID_JSON = "invalid_json"
    INVALID_FRAME = "invalid_frame"
    FRAME_TOO_LARGE = "frame_too_large"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_FIELD = "invalid_field"
    # What it asks for (socket and API).
    EMPTY = "empty"
    TOO_LONG = "too_long"
    PROFILE_NOT_ALLOWED = "profile_not_allowed"
    RUN_IN_PROGRESS = "run_in_progress"
    RATE_LIMITED = "rate_limited"
    QUOTA_EXCEEDED = "quota_exceeded"
    # A monthly budget (the user's or a group's) is used up until the first of next month.
    MONTHLY_BUDGET_REACHED = "monthly_budget_reached"
    NOT_FOUND = "not_found"
    NOTHING_TO_REGENERATE = "nothing_to_regenerate"
    NOT_EDITABLE = "not_editable"
    # "Retry from here" on a run that has not ended, is a replay, or on no step of it.
    NOT_FORKABLE = "not_forkable"
    # "Continue" on a message that is not an answer its owner stopped with some text.
    NOT_CONTINUABLE = "not_continuable"
    # The sign-in that opened the socket ended (socket only; it then closes with 4401).
    SIGNED_OUT = "signed_out"
    NOT_RATEABLE = "not_rateable"
    # Approval and Continue: already decided (another tab won), or the run is not paused so.
    ALREADY_DECIDED = "already_decided"
    NOT_PAUSED = "not_paused"
    # An attached file (API only; docs/protocol.md, "Attachments"). Nothing is stored.
    FILE_TOO_LARGE = "file_too_large"
    TOO_MANY_FILES = "too_many_files"
    FILE_TYPE_NOT_ALLOWED = "file_type_not_allowed"
    FILE_TYPE_MISMATCH = "file_type_mismatch"
    FILE_UNSAFE = "file_unsafe"
    FILE_ENCRYPTED = "file_encrypted"
    FILE_TOO_MANY_PAGES = "file_too_many_pages"
    FILE_UNREADABLE = "file_unreadable"
    OCR_UNAVAILABLE = "ocr_unavailable"
    # Schedules and webhooks (agents/services/schedules.py, webhooks.py).
    INVALID_SCHEDULE = "invalid_schedule"
    WEBHOOK_URL_REFUSED = "webhook_url_refused"
    # A folder of the sidebar named like another of the same user's (API only).
    FOLDER_NAME_TAKEN = "folder_name_taken"
    # /v1/chat/completions: earlier turns in ``messages`` without a conversation to continue.
    HISTORY_NOT_SUPPORTED = "history_not_supported"


class RequestRefused(Exception):
    """A client's request (send, edit, regenerate, cancel, create, or a malformed frame)
    that was not acted on; nothing was written.

    The socket answers it with an ``error`` frame and the API with ``{"code", "message"}``,
    each in one place (``agents/consumers.py``, ``agents/api/exceptions.py``).
    """

    def __init__(
        self,
        code: RefusalCode,
        message: str,
        *,
        retry_after: float | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        # Seconds until the same request would be accepted, for refusals that pass with time.
        self.retry_after = retry_after
        # The input the refusal is about, when it is one (a schedule's ``rrule``, say): the
        # API names it in ``fields`` and a form shows the message beside it.
        self.field = field


# Close code for anyone who may not open a conversation, including when it does not exist,
# so a refusal tells a stranger nothing. Outside 1000-3999, so clients can tell it from a drop.
CLOSE_NOT_FOUND = 4404
# The sign-in that opened the socket ended (logout, expiry, password change).
CLOSE_SIGNED_OUT = 4401
# The client read nothing of what it was sent within CHAT_SOCKET_DRAIN_TIMEOUT_SECONDS.
CLOSE_NOT_READING = 4408
# The user already has CHAT_MAX_SOCKETS_PER_USER sockets open on this daphne process.
CLOSE_TOO_MANY_SOCKETS = 4429

CLIENT_ID_MAX_CHARS = 64


def max_message_chars() -> int:
    """The most characters a message's ``content`` may have, on the socket and over HTTP."""
    limit: int = settings.CHAT_MAX_MESSAGE_CHARS
    return limit


def max_frame_bytes() -> int:
    """The most UTF-8 bytes one client frame may have; checked before it is parsed."""
    limit: int = settings.CHAT_MAX_FRAME_BYTES
    return limit


# ---- frames and payloads the server builds ------------------------------------------------
# A stored event keeps only its payload; ``event_frame`` adds what every stored frame carries.


def event_frame(event: RunEvent | StoredEvent) -> dict[str, Any]:
    """The frame a client receives for a stored event, live or replayed."""
    return {
        **event.payload,
        "type": event.type,
        "seq": event.seq,
        "run_id": event.run_id,
        "ts": event.created_at.isoformat(),
    }


def message_payload(message: Message) -> dict[str, Any]:
    """A message as the protocol shows it; assistant messages carry rendered ``html``."""
    payload: dict[str, Any] = {
        "id": message.pk,
        "role": message.role,
        "content": message.content,
        "client_id": message.client_id,
        "run_id": message.run_id,
        # Where it sits in the conversation's tree (agents/models.py, Message).
        "parent_id": message.parent_id,
        "created_at": message.created_at.isoformat(),
    }
    if message.role == Message.Role.ASSISTANT:
        payload["html"] = render_markdown(message.content)
    return payload


def message_created_payload(
    message: Message, *, edited_from: Message | None = None
) -> dict[str, Any]:
    payload = message_payload(message)
    if edited_from is not None:
        payload["edited_from"] = edited_from.pk
    return {"message": payload}


def run_started_payload(
    *, attempt: int, model: str, profile: str, trigger_message_id: int | None = None
) -> dict[str, Any]:
    """``trigger_message_id`` is the question the run answers: where its frames belong in
    the conversation's tree (a regenerated answer has no ``message.created`` of its own)."""
    return {
        "attempt": attempt,
        "model": model,
        "profile": profile,
        "trigger_message_id": trigger_message_id,
    }


def usage_payload(run: AgentRun) -> dict[str, Any]:
    duration = run.duration_seconds
    return {
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "duration_ms": int(duration * 1000) if duration is not None else 0,
    }


def run_finished_payload(
    *, run: AgentRun, message: Message | None, stop_reason: str, answer: str = ""
) -> dict[str, Any]:
    """A child run (a sub-agent's) has no message: its ``answer`` is its parent's
    observation."""
    payload = {
        "message": message_payload(message) if message is not None else None,
        "usage": usage_payload(run),
        "stop_reason": stop_reason,
    }
    if message is None:
        payload["answer"] = answer
    return payload


def run_failed_payload(*, code: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


def run_cancelled_payload(*, partial_answer: str, message: Message | None) -> dict[str, Any]:
    return {
        "partial_answer": partial_answer,
        "message": message_payload(message) if message else None,
    }


def approval_requested_payload(approval: ToolApproval) -> dict[str, Any]:
    """The exact call a run paused for; ``kind`` lets a resumed run read it as a step."""
    return {
        "kind": "approval_request",
        "approval_id": approval.pk,
        "call_id": approval.call_id,
        "tool": approval.tool,
        "tool_input": approval.tool_input,
        "requested_at": approval.requested_at.isoformat(),
        "expires_at": (
            approval.requested_at + timedelta(seconds=settings.CHAT_APPROVAL_EXPIRES_AFTER)
        ).isoformat(),
    }


def approval_decided_payload(approval: ToolApproval) -> dict[str, Any]:
    """The one decision on a request; ``approved`` and ``reason`` are what the engine reads."""
    decided_by = approval.decided_by
    return {
        "kind": "approval_decision",
        "approval_id": approval.pk,
        "call_id": approval.call_id,
        "tool": approval.tool,
        "decision": approval.decision,
        "approved": approval.decision == ToolApproval.Decision.APPROVED,
        "reason": approval.reason,
        "decided_by": decided_by.get_username() if decided_by is not None else "",
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
    }


def run_budget_reached_payload(
    *, limit: str, message: str, tool: str, continue_steps: int | None
) -> dict[str, Any]:
    return {"limit": limit, "message": message, "tool": tool, "continue_steps": continue_steps}


def run_waiting_payload(*, call_ids: list[str], child_run_ids: list[int]) -> dict[str, Any]:
    """A run paused until the child runs of these calls have ended (``awaiting_subagent``)."""
    return {"waiting_for": "subagents", "call_ids": call_ids, "child_run_ids": child_run_ids}


def run_continued_payload(*, budget_grants: int, continued_by: str) -> dict[str, Any]:
    return {"budget_grants": budget_grants, "continued_by": continued_by}


def answer_delta_frame(*, run_id: int | None, text: str) -> dict[str, Any]:
    return {"type": FrameType.ANSWER_DELTA, "run_id": run_id, "text": text}


def memory_summarized_frame(summary: MemorySummary) -> dict[str, Any]:
    return {
        "type": FrameType.MEMORY_SUMMARIZED,
        "summary_id": summary.pk,
        "covers_through": summary.covers_through_id,
        "token_count": summary.token_count,
        "text": summary.text,
    }


def error_frame(
    code: RefusalCode,
    message: str,
    *,
    client_id: str | None = None,
    retry_after: float | None = None,
) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": FrameType.ERROR, "code": code, "message": message}
    if client_id is not None:
        frame["client_id"] = client_id
    if retry_after is not None:
        frame["retry_after"] = math.ceil(retry_after)
    return frame


def pong_frame() -> dict[str, Any]:
    return {"type": FrameType.PONG}


# --------------------------------------------------------------------------------------
# Notifications (docs/protocol.md, "Notifications")
# --------------------------------------------------------------------------------------


def notification_payload(notification: Notification) -> dict[str, Any]:
    """A notification as the bell, the socket, the API and a webhook show it."""
    return {
        "id": notification.pk,
        "kind": notification.kind,
        "run_id": notification.run_id,
        "conversation_id": notification.conversation_id,
        "schedule_id": notification.schedule_id,
        "detail": notification.detail,
        "read": notification.read_at is not None,
        "created_at": notification.created_at.isoformat(),
    }


def notification_frame(notification: Notification, *, unread: int) -> dict[str, Any]:
    return {
        "type": FrameType.NOTIFICATION,
        "notification": notification_payload(notification),
        "unread": unread,
    }


def notifications_unread_frame(unread: int) -> dict[str, Any]:
    return {"type": FrameType.NOTIFICATIONS_UNREAD, "unread": unread}


# --------------------------------------------------------------------------------------
# Evaluations (docs/protocol.md, "Evaluation progress")
# --------------------------------------------------------------------------------------


def evaluation_result_payload(result: EvalResult) -> dict[str, Any]:
    """One case's result as the evaluation's page shows it (``passed`` None: not checked)."""
    return {
        "id": result.pk,
        "case_id": result.case_id,
        "run_id": result.run_id,
        "passed": result.passed,
        "checks": [
            {
                "expectation": str(check.get("expectation", "")),
                "passed": bool(check.get("passed")),
                "detail": str(check.get("detail", "")),
            }
            for check in result.checks or []
        ],
        "tokens": result.tokens,
        "steps": result.steps,
    }


def evaluation_progress_frame(
    eval_run: EvalRun, results: list[EvalResult], *, checked: int, passed: int
) -> dict[str, Any]:
    """Where an evaluation stands (``checked`` and ``passed`` count its cases so far) and
    the results that changed: every one as the socket opens, then each as it changes."""
    return {
        "type": FrameType.EVALUATION_PROGRESS,
        "evaluation": {
            "id": eval_run.pk,
            "status": eval_run.status,
            "cases": eval_run.cases,
            "checked": checked,
            "passed": passed,
        },
        "results": [evaluation_result_payload(result) for result in results],
    }


def budget_warning_frame(message: str) -> dict[str, Any]:
    """The chat's budget notice as a reload would show it ("" when none applies now)."""
    return {"type": FrameType.BUDGET_WARNING, "message": message}
