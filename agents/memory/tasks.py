"""The summariser task: thin, takes an id, safe to run twice (see the service it wraps,
``memory/summaries.py``)."""

from __future__ import annotations

from celery import shared_task

from agents.memory import summaries
from agents.models import Conversation
from agents.react.errors import (
    ModelBadResponse,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
)

# A summary that cannot be written now is not urgent: runs meanwhile fall back to a bounded
# window. Back off up to ten minutes between tries, and give up after six. A rejected key, an
# exhausted quota or a misconfigured endpoint will not fix itself: those fail at once.
MAX_RETRIES = 6
TRANSIENT_MODEL_ERRORS = (ModelUnavailable, ModelTimeout, ModelRateLimited, ModelBadResponse)


_RETRYING = {
    "autoretry_for": TRANSIENT_MODEL_ERRORS,
    "max_retries": MAX_RETRIES,
    "retry_backoff": 5,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "acks_late": True,
}


def _memory_summary_create(
    conversation_id: int, force: bool = False, leaf_id: int | None = None
) -> int | None:
    """Fold old turns of one branch (ending at ``leaf_id``; None, as tasks enqueued before
    the tree say: the active one) into its summary; the id of the newest row written."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        return None  # deleted since the task was enqueued
    try:
        summary = summaries.memory_summary_create(
            conversation=conversation, force=force, leaf_id=leaf_id
        )
    except TRANSIENT_MODEL_ERRORS:
        raise  # retried: a /compact stays pending meanwhile
    except Exception:
        if force:
            summaries.summary_request_done(conversation_id=conversation_id)
        raise
    if force:
        summaries.summary_request_done(conversation_id=conversation_id)
    return summary.pk if summary else None


memory_summary_create = shared_task(name="agents.memory_summary_create", **_RETRYING)(
    _memory_summary_create
)
# The task's name before it was named after its service: a summary enqueued (or waiting out
# a retry back-off of up to ten minutes) before a deploy still runs. Nothing enqueues it any
# more; drop it a release later.
summarize_conversation_queued_before_rename = shared_task(
    name="agents.memory.tasks.summarize_conversation", **_RETRYING
)(_memory_summary_create)
