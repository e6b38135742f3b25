"""The summariser task: thin, takes an id, safe to run twice (see ``memory_summary_create``)."""

from __future__ import annotations

from celery import shared_task

from agents.memory.services import memory_summary_create, summary_request_done
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


@shared_task(
    autoretry_for=TRANSIENT_MODEL_ERRORS,
    max_retries=MAX_RETRIES,
    retry_backoff=5,
    retry_backoff_max=600,
    retry_jitter=True,
    acks_late=True,
)
def summarize_conversation(conversation_id: int, force: bool = False) -> int | None:
    """Fold the conversation's old turns into its summary; the id of the newest row written."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        return None  # deleted since the task was enqueued
    try:
        summary = memory_summary_create(conversation=conversation, force=force)
    except TRANSIENT_MODEL_ERRORS:
        raise  # retried: a /compact stays pending meanwhile
    except Exception:
        if force:
            summary_request_done(conversation_id=conversation_id)
        raise
    if force:
        summary_request_done(conversation_id=conversation_id)
    return summary.pk if summary else None
