"""Conversation memory: what a run sees of the past, and the summaries that keep it bounded.

``memory_for_run`` is read at the start of every run, ``memory_after_run`` at its end, and
either may enqueue the summarising task (``memory/tasks.py``), whose work is in
``memory/summaries.py``, the layer below: the task imports that module, never this one.

Memory follows the branch (agents/services/branches.py). A run reads the branch its question
is on and nothing else; a summary describes the path from the first message to its
``covers_through``, so it is used only on branches through that message, and each chain of
summaries lies along one branch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from django.conf import settings as django_settings
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils.translation import gettext

from agents.memory import tasks
from agents.memory.strategies import (
    BUFFER,
    SUMMARY_BUFFER,
    WINDOW,
    HistoryMessage,
    MemorySettings,
    choose_cut,
    needs_summary,
    select_summary_buffer,
    split_turns,
    turns_to_messages,
    unsummarised_tokens,
    window,
)
from agents.memory.summaries import (
    COMPACT_PENDING_SECONDS,
    active_leaf_id,
    branch_messages,
    compact_pending_key,
    last_turn_closed,
    lines_after,
    newest_summary,
)
from agents.models import AgentRun, Conversation, Message
from agents.profile_snapshot import ProfileSnapshot, snapshot_model_name
from agents.protocol import RefusalCode, RequestRefused
from agents.ratelimit import rate_limit_hit
from agents.react.types import ChatMessage
from agents.services.usage import (
    QuotaExceeded,
    usage_check_quota,
    usage_refusal,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryContext:
    """What a run is given of the conversation before its question."""

    summary: str
    history: list[ChatMessage]
    summary_id: int | None
    # ``summary_buffer`` only: the tokens of the stored summary and of every turn after its
    # cut, before the run's own turn. The run's end adds that turn to it rather than reading
    # the branch and counting it again (``memory_after_run``).
    unsummarised_tokens: int | None = None


def memory_for_run(
    *,
    conversation: Conversation,
    snapshot: ProfileSnapshot,
    model_name: str,
    before_message: Message | None,
) -> MemoryContext:
    """The bounded past for a run answering ``before_message``: the branch above it (None:
    the conversation's active branch, as a preview shows it).

        ``summary_buffer`` gives the newest summary and the turns after its cut, the oldest of
        those left out if they would take the total over the token budget (a summary is pending,
        or failed): the prompt stays bounded either way.
    """
    settings = snapshot.memory
    leaf_id = (
        before_message.parent_id if before_message is not None else conversation.active_leaf_id
    )
    branch = branch_messages(conversation, leaf_id)

    if settings.strategy == BUFFER:
        return MemoryContext("", [message.as_chat() for message in branch], None)

    if settings.strategy == WINDOW:
        turns = split_turns(branch, model=model_name)
        return MemoryContext("", turns_to_messages(window(turns, settings.window_turns)), None)

    summary = newest_summary(conversation, branch)
    turns = split_turns(lines_after(branch, summary), model=model_name)
    unsummarised = unsummarised_tokens(
        summary=summary.text if summary else "", turns_after_summary=turns, model=model_name
    )
    selection = select_summary_buffer(
        summary=summary.text if summary else "",
        turns_after_summary=turns,
        budget=settings.token_budget,
        model=model_name,
    )
    if selection.trimmed_turns:
        logger.info(
            "conversation %s: %d unsummarised turns left out to stay within %d tokens",
            conversation.pk,
            selection.trimmed_turns,
            settings.token_budget,
        )
    return MemoryContext(
        selection.summary, selection.history, summary.pk if summary else None, unsummarised
    )


# --------------------------------------------------------------------------------------
# Deciding to summarise
# --------------------------------------------------------------------------------------


def _over_budget(
    conversation: Conversation, settings: MemorySettings, model: str, leaf_id: int | None
) -> bool:
    branch = branch_messages(conversation, leaf_id)
    summary = newest_summary(conversation, branch)
    turns = split_turns(lines_after(branch, summary), model=model)
    return needs_summary(
        summary=summary.text if summary else "",
        turns_after_summary=turns,
        budget=settings.token_budget,
        model=model,
    )


def _enqueue_summary(conversation_id: int, *, force: bool, leaf_id: int | None) -> None:
    transaction.on_commit(
        lambda: tasks.memory_summary_create.delay(conversation_id, force=force, leaf_id=leaf_id)
    )


def memory_after_run(
    *,
    conversation: Conversation,
    snapshot: ProfileSnapshot,
    run: AgentRun | None = None,
    context: MemoryContext | None = None,
    answer: Message | None = None,
) -> bool:
    """Enqueue summarising, after commit, when the branch the run answered on (without a
    run: the active branch) no longer fits its budget.

    A run passes the ``context`` it was given and the ``answer`` it stored: the branch is
    then what the context counted plus the question and the answer, with nothing read again.
    A summary stored while the run worked is not seen that way; at worst a summarising task
    is enqueued that finds nothing to fold. Returns whether a task was enqueued. Only
    ``summary_buffer`` profiles summarise.
    """
    settings = snapshot.memory
    if settings.strategy != SUMMARY_BUFFER:
        return False
    if (
        run is not None
        and answer is not None
        and context is not None
        and context.unsummarised_tokens is not None
    ):
        question = run.trigger_message
        turn = split_turns(
            [
                HistoryMessage(id=question.pk, role=question.role, content=question.content),
                HistoryMessage(id=answer.pk, role=answer.role, content=answer.content),
            ],
            model=run.model_name,  # what the context was counted with
        )
        over = context.unsummarised_tokens + sum(t.tokens for t in turn) > settings.token_budget
        leaf_id: int | None = answer.pk
    else:
        leaf_id = None
        if run is not None:
            leaf_id = Message.objects.filter(run=run).values_list("pk", flat=True).first()
        if leaf_id is None:
            leaf_id = active_leaf_id(conversation)
        over = _over_budget(conversation, settings, snapshot_model_name(snapshot), leaf_id)
    if not over:
        return False
    _enqueue_summary(conversation.pk, force=False, leaf_id=leaf_id)
    return True


class SummaryRequest(StrEnum):
    """What ``summary_request`` did."""

    QUEUED = "queued"
    ALREADY_PENDING = "already_pending"  # a /compact of this conversation is still working
    NOTHING_TO_FOLD = "nothing_to_fold"


def summary_request(*, conversation: Conversation, user) -> SummaryRequest:
    """Summarise now (the ``/compact`` command or button): fold every finished turn of the
    active branch at once.

    Only the owner may ask (``PermissionDenied`` otherwise). Enqueues nothing when no
    finished turn is left outside the summary, or when an earlier request is still pending.
    Raises ``RequestRefused`` (``rate_limited``, ``quota_exceeded``) past the user's limits.
    """
    if conversation.owner_id != getattr(user, "pk", None):
        raise PermissionDenied(gettext("Only the conversation's owner can summarise it."))
    leaf_id = active_leaf_id(conversation)
    branch = branch_messages(conversation, leaf_id)
    turns = split_turns(lines_after(branch, newest_summary(conversation, branch)))
    foldable = choose_cut(
        turns, keep_tokens=0, last_turn_closed=last_turn_closed(conversation), keep_at_least=0
    )
    if not foldable:
        return SummaryRequest.NOTHING_TO_FOLD
    if cache.get(compact_pending_key(conversation.pk)):
        return SummaryRequest.ALREADY_PENDING
    try:
        usage_check_quota(user_id=user.pk)
    except QuotaExceeded as exceeded:
        raise usage_refusal(exceeded) from None
    limit = django_settings.CHAT_COMPACTS_PER_MINUTE
    if not rate_limit_hit(action="compact", user_id=user.pk, limit=limit).allowed:
        raise RequestRefused(
            RefusalCode.RATE_LIMITED,
            gettext("At most %(limit)s summaries a minute; try again soon.") % {"limit": limit},
        )
    if not cache.add(compact_pending_key(conversation.pk), 1, timeout=COMPACT_PENDING_SECONDS):
        return SummaryRequest.ALREADY_PENDING  # another request got there first
    _enqueue_summary(conversation.pk, force=True, leaf_id=leaf_id)
    return SummaryRequest.QUEUED
