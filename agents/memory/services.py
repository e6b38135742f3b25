"""Conversation memory: what a run sees of the past, and the summaries that keep it bounded.

``memory_for_run`` is read at the start of every run, ``memory_after_run`` at its end, and
``memory_summary_create`` is the work of the task of the same name (``memory/tasks.py``).
Summaries form a chain: each row folds the lines after the previous row's cut into the
previous text, so row N summarises everything from the first message through its
``covers_through``, and the rows' ``covers_from``..``covers_through`` ranges (the lines each
one added) tile the history.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from django.conf import settings as django_settings
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, connection, transaction
from django.utils.translation import gettext

from agents.memory.strategies import (
    BUFFER,
    SUMMARY_BUFFER,
    WINDOW,
    ConversationTurn,
    HistoryMessage,
    MemorySettings,
    choose_cut,
    needs_summary,
    select_summary_buffer,
    split_turns,
    turns_to_messages,
    window,
)
from agents.memory.summarizer import summary_tokens, write_summary
from agents.models import AgentRun, Conversation, MemorySummary, Message, UsageEntry
from agents.profile_snapshot import ProfileSnapshot, snapshot_model_config, snapshot_model_name
from agents.protocol import RefusalCode, RequestRefused, memory_summarized_frame
from agents.ratelimit import rate_limit_hit
from agents.react.types import ChatMessage, ChatModel
from agents.services.defaults import default_profile
from agents.services.usage import (
    QuotaExceeded,
    usage_check_quota,
    usage_record_tokens,
    usage_reserve,
    usage_settle,
)

logger = logging.getLogger(__name__)

# One summarising call folds at most this many tokens of new lines; a longer backlog (after
# /compact on a long conversation, or after the summariser was down) takes several calls,
# each stored as its own row, so progress survives a failure halfway.
MAX_FOLD_TOKENS = 6000
# A task stops after this many calls; anything left is picked up after the next run.
MAX_FOLD_ROUNDS = 25
# A /compact counts as pending until its task ends, or at the latest after this long (a task
# whose worker died, or one waiting between retries).
COMPACT_PENDING_SECONDS = 600


@dataclass(frozen=True)
class MemoryContext:
    """What a run is given of the conversation before its question."""

    summary: str
    history: list[ChatMessage]
    summary_id: int | None


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def _history(
    conversation: Conversation, *, after_id: int | None = None, before_id: int | None = None
) -> list[HistoryMessage]:
    messages = Message.objects.filter(conversation=conversation)
    if after_id is not None:
        messages = messages.filter(id__gt=after_id)
    if before_id is not None:
        messages = messages.filter(id__lt=before_id)
    rows = messages.order_by("id").values_list("id", "role", "content")
    return [HistoryMessage(id=pk, role=role, content=content) for pk, role, content in rows]


def _newest_summary(
    conversation: Conversation, *, before_id: int | None = None
) -> MemorySummary | None:
    summaries = MemorySummary.objects.filter(conversation=conversation)
    if before_id is not None:
        summaries = summaries.filter(covers_through_id__lt=before_id)
    return summaries.order_by("-covers_through_id").first()


def memory_for_run(
    *,
    conversation: Conversation,
    snapshot: ProfileSnapshot,
    model_name: str,
    before_message: Message | None,
) -> MemoryContext:
    """The bounded past for a run answering ``before_message`` (None: the whole conversation).

    ``summary_buffer`` gives the newest summary and the turns after its cut, the oldest of
    those left out if they would take the total over the token budget (a summary is pending,
    or failed): the prompt stays bounded either way.
    """
    settings = snapshot.memory
    before_id = before_message.pk if before_message is not None else None

    if settings.strategy == BUFFER:
        history = _history(conversation, before_id=before_id)
        return MemoryContext("", [message.as_chat() for message in history], None)

    if settings.strategy == WINDOW:
        turns = split_turns(_history(conversation, before_id=before_id), model=model_name)
        return MemoryContext("", turns_to_messages(window(turns, settings.window_turns)), None)

    summary = _newest_summary(conversation, before_id=before_id)
    after_id = summary.covers_through_id if summary else None
    turns = split_turns(
        _history(conversation, after_id=after_id, before_id=before_id), model=model_name
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
    return MemoryContext(selection.summary, selection.history, summary.pk if summary else None)


# --------------------------------------------------------------------------------------
# Deciding to summarise
# --------------------------------------------------------------------------------------


def _over_budget(conversation: Conversation, settings: MemorySettings, model: str) -> bool:
    summary = _newest_summary(conversation)
    turns = split_turns(
        _history(conversation, after_id=summary.covers_through_id if summary else None),
        model=model,
    )
    return needs_summary(
        summary=summary.text if summary else "",
        turns_after_summary=turns,
        budget=settings.token_budget,
        model=model,
    )


def _enqueue_summary(conversation_id: int, *, force: bool) -> None:
    from agents.memory import tasks

    transaction.on_commit(lambda: tasks.memory_summary_create.delay(conversation_id, force=force))


def memory_after_run(*, conversation: Conversation, snapshot: ProfileSnapshot) -> bool:
    """Enqueue summarising, after commit, when the conversation no longer fits its budget.

    Returns whether a task was enqueued. Only ``summary_buffer`` profiles summarise.
    """
    settings = snapshot.memory
    if settings.strategy != SUMMARY_BUFFER:
        return False
    if not _over_budget(conversation, settings, snapshot_model_name(snapshot)):
        return False
    _enqueue_summary(conversation.pk, force=False)
    return True


class SummaryRequest(StrEnum):
    """What ``summary_request`` did."""

    QUEUED = "queued"
    ALREADY_PENDING = "already_pending"  # a /compact of this conversation is still working
    NOTHING_TO_FOLD = "nothing_to_fold"


def summary_request(*, conversation: Conversation, user) -> SummaryRequest:
    """Summarise now (the ``/compact`` command or button): fold every finished turn at once.

    Only the owner may ask (``PermissionDenied`` otherwise). Enqueues nothing when no
    finished turn is left outside the summary, or when an earlier request is still pending.
    Raises ``RequestRefused`` (``rate_limited``, ``quota_exceeded``) past the user's limits.
    """
    if conversation.owner_id != getattr(user, "pk", None):
        raise PermissionDenied("Only the conversation's owner can summarise it.")
    summary = _newest_summary(conversation)
    turns = split_turns(
        _history(conversation, after_id=summary.covers_through_id if summary else None)
    )
    foldable = choose_cut(
        turns, keep_tokens=0, last_turn_closed=_last_turn_closed(conversation), keep_at_least=0
    )
    if not foldable:
        return SummaryRequest.NOTHING_TO_FOLD
    if cache.get(_compact_pending_key(conversation.pk)):
        return SummaryRequest.ALREADY_PENDING
    try:
        usage_check_quota(user_id=user.pk)
    except QuotaExceeded:
        raise RequestRefused(
            RefusalCode.QUOTA_EXCEEDED, gettext("You have used today's token allowance.")
        ) from None
    limit = django_settings.CHAT_COMPACTS_PER_MINUTE
    if not rate_limit_hit(action="compact", user_id=user.pk, limit=limit).allowed:
        raise RequestRefused(
            RefusalCode.RATE_LIMITED,
            gettext("At most %(limit)s summaries a minute; try again soon.") % {"limit": limit},
        )
    if not cache.add(_compact_pending_key(conversation.pk), 1, timeout=COMPACT_PENDING_SECONDS):
        return SummaryRequest.ALREADY_PENDING  # another request got there first
    _enqueue_summary(conversation.pk, force=True)
    return SummaryRequest.QUEUED


def _compact_pending_key(conversation_id: int) -> str:
    return f"memory:compact-pending:{conversation_id}"


def summary_request_done(*, conversation_id: int) -> None:
    """The forced summary ended (written, nothing to do, or failed for good)."""
    cache.delete(_compact_pending_key(conversation_id))


# --------------------------------------------------------------------------------------
# Summarising (the task's work)
# --------------------------------------------------------------------------------------


def _snapshot_for(conversation: Conversation) -> ProfileSnapshot:
    """The profile snapshot the conversation's latest run used, else its profile's today."""
    latest = (
        AgentRun.objects.filter(conversation=conversation, profile_version__isnull=False)
        .select_related("profile_version")
        .order_by("-id")
        .first()
    )
    if latest is not None and latest.profile_version is not None:
        return ProfileSnapshot.from_version(latest.profile_version)
    return ProfileSnapshot.from_profile(conversation.profile or default_profile())


def _last_turn_closed(conversation: Conversation) -> bool:
    """False while a run is still answering (its turn's answer is not written yet)."""
    return not (
        AgentRun.objects.filter(conversation=conversation)
        .exclude(status__in=AgentRun.TERMINAL_STATUSES)
        .exists()
    )


@dataclass(frozen=True)
class _FoldPlan:
    base_summary_id: int | None
    base_text: str
    turns: list[ConversationTurn]

    @property
    def lines(self) -> list[HistoryMessage]:
        return [message for turn in self.turns for message in turn.messages]


def _plan(
    conversation: Conversation, settings: MemorySettings, *, model: str, force: bool
) -> _FoldPlan | None:
    summary = _newest_summary(conversation)
    text = summary.text if summary else ""
    turns = split_turns(
        _history(conversation, after_id=summary.covers_through_id if summary else None),
        model=model,
    )
    if not force and not needs_summary(
        summary=text, turns_after_summary=turns, budget=settings.token_budget, model=model
    ):
        return None
    count = choose_cut(
        turns,
        keep_tokens=0 if force else settings.keep_verbatim_tokens,
        last_turn_closed=_last_turn_closed(conversation),
        keep_at_least=0 if force else 1,
    )
    folded: list[ConversationTurn] = []
    used = 0
    for turn in turns[:count]:
        if folded and used + turn.tokens > MAX_FOLD_TOKENS:
            break
        folded.append(turn)
        used += turn.tokens
    if not folded:
        return None
    return _FoldPlan(summary.pk if summary else None, text, folded)


def _store(
    conversation: Conversation, plan: _FoldPlan, text: str, model: str
) -> MemorySummary | None:
    """Write the new row, or return None if another summariser moved the cut meanwhile."""
    with transaction.atomic():
        # Held only for these few queries, never during the model call: runs take the same
        # row lock to number their events (docs/architecture.md, invariant 3).
        Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        newest = _newest_summary(conversation)
        if (newest.pk if newest else None) != plan.base_summary_id:
            return None
        first, last = plan.lines[0], plan.lines[-1]
        now_in_range = Message.objects.filter(
            conversation=conversation, id__gte=first.id, id__lte=last.id
        ).values_list("id", flat=True)
        if sorted(now_in_range) != [line.id for line in plan.lines]:
            return None  # lines deleted (an edit and resend) or arrived behind the cut
        following = (
            Message.objects.filter(conversation=conversation, id__gt=last.id)
            .order_by("id")
            .values_list("role", flat=True)
            .first()
        )
        if following not in (None, Message.Role.USER):
            return None  # the folded turn got another answer meanwhile: plan it again
        try:
            with transaction.atomic():
                summary = MemorySummary.objects.create(
                    conversation=conversation,
                    text=text,
                    covers_from_id=first.id,
                    covers_through_id=last.id,
                    token_count=summary_tokens(text, model),
                    model_name=model,
                )
        except IntegrityError:
            return None
    _announce(summary)
    return summary


def _announce(summary: MemorySummary) -> None:
    """Tell open chats to move their "earlier messages summarised" marker (not stored:
    a page loaded later reads the marker from the database)."""
    from agents import events

    frame = memory_summarized_frame(summary)
    transaction.on_commit(lambda: events.publish_ephemeral(summary.conversation_id, frame))


def memory_summary_create(
    *, conversation: Conversation, force: bool = False, chat_model: ChatModel | None = None
) -> MemorySummary | None:
    """Fold old turns into the conversation's summary; the newest row written, or None.

    Without ``force`` it does nothing unless the conversation is over its budget, and keeps
    the newest turns verbatim; with ``force`` (``/compact``) it folds every finished turn.
    Safe to run twice at once: the model is called outside any lock, and a result whose base
    summary is no longer the newest is dropped and the work planned again. Model failures
    propagate (the task retries); nothing is stored then and no message is touched.
    Its model calls count against the owner's daily token quota; over it, nothing is called.
    """
    snapshot = _snapshot_for(conversation)
    settings = snapshot.memory
    model_config = snapshot_model_config(snapshot)
    if chat_model is None:
        from agents.llm.factory import chat_model_for

        chat_model = chat_model_for(model_config)
    model = getattr(chat_model, "model_name", "") or ""

    if _plan(conversation, settings, model=model, force=force) is None:
        return None
    try:
        # Summaries count against the owner's daily quota like runs (agents/services/usage.py).
        with transaction.atomic():
            usage = usage_reserve(
                user_id=conversation.owner_id,
                kind=UsageEntry.Kind.SUMMARY,
                conversation_id=conversation.pk,
                model_config_id=model_config.pk if model_config else None,
            )
    except QuotaExceeded:
        logger.info("conversation %s: not summarised, its owner is over quota", conversation.pk)
        return None
    try:
        return _fold(conversation, settings, chat_model, model=model, force=force, usage=usage)
    finally:
        usage_settle(entry=usage)


def _fold(
    conversation: Conversation,
    settings: MemorySettings,
    chat_model: ChatModel,
    *,
    model: str,
    force: bool,
    usage: UsageEntry,
) -> MemorySummary | None:
    newest = None
    for _ in range(MAX_FOLD_ROUNDS):
        plan = _plan(conversation, settings, model=model, force=force)
        if plan is None:
            break
        if not connection.in_atomic_block:
            connection.close()  # no connection held idle while the model writes
        completion = write_summary(
            chat_model=chat_model,
            current_summary=plan.base_text,
            new_lines=plan.lines,
            target_tokens=settings.summary_target_tokens,
        )
        usage_record_tokens(
            entry=usage,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
        )
        stored = _store(conversation, plan, completion.text, model)
        if stored is None:
            logger.info("conversation %s: summary superseded, planning again", conversation.pk)
            continue
        newest = stored
    return newest
