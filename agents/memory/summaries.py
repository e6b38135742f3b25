"""Writing a conversation's summaries: the work of the summarising task (``memory/tasks.py``).

Summaries form a chain: each row folds the lines after the previous row's cut into the
previous text, so row N summarises everything from the first message through its
``covers_through``, and the rows' ``covers_from``..``covers_through`` ranges (the lines each
one added) tile the history. A summary describes the path from the first message to its
``covers_through``, so each chain of summaries lies along one branch.

Below ``memory/services.py``, which decides when to summarise and enqueues the task: the
task calls down into this module, and nothing here enqueues.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.cache import cache
from django.db import IntegrityError, connection, transaction

from agents.memory.strategies import (
    ConversationTurn,
    HistoryMessage,
    MemorySettings,
    choose_cut,
    needs_summary,
    split_turns,
)
from agents.memory.summarizer import summary_tokens, write_summary
from agents.models import AgentRun, Conversation, MemorySummary, Message, UsageEntry
from agents.profile_snapshot import ProfileSnapshot, snapshot_model_config
from agents.protocol import memory_summarized_frame
from agents.react.types import ChatModel
from agents.selectors import branch_lines, branch_newest_leaf
from agents.services.defaults import default_profile
from agents.services.usage import (
    QuotaExceeded,
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

# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def branch_messages(conversation: Conversation, leaf_id: int | None) -> list[HistoryMessage]:
    """The messages from the first one down to ``leaf_id``: one branch of the tree."""
    rows = branch_lines(conversation=conversation, leaf_id=leaf_id)
    return [HistoryMessage(id=pk, role=role, content=content) for pk, role, content in rows]


def newest_summary(
    conversation: Conversation, branch: Sequence[HistoryMessage]
) -> MemorySummary | None:
    """The summary with the newest cut on this branch: one that ends elsewhere describes
    another branch and is never used here."""
    if not branch:
        return None
    return (
        MemorySummary.objects.filter(
            conversation=conversation, covers_through_id__in=[line.id for line in branch]
        )
        .order_by("-covers_through_id")
        .first()
    )


def lines_after(
    branch: Sequence[HistoryMessage], summary: MemorySummary | None
) -> list[HistoryMessage]:
    if summary is None:
        return list(branch)
    return [line for line in branch if line.id > summary.covers_through_id]


def _continued(conversation: Conversation, leaf_id: int | None) -> int | None:
    """The newest message below ``leaf_id`` (itself if none): the branch as it goes on now.

    A summary task reads it rather than the leaf it was given, so tasks of one line of
    conversation enqueued one after another all fold along the same, newest path, and each
    row's cut is checked against everything already summarised on it (``_store``)."""
    if leaf_id is None:
        return None
    return branch_newest_leaf(conversation=conversation, message_id=leaf_id)


def active_leaf_id(conversation: Conversation) -> int | None:
    """Read afresh: a run ending or a switch in another request may have moved it."""
    return (
        Conversation.objects.filter(pk=conversation.pk)
        .values_list("active_leaf_id", flat=True)
        .first()
    )


def compact_pending_key(conversation_id: int) -> str:
    return f"memory:compact-pending:{conversation_id}"


def summary_request_done(*, conversation_id: int) -> None:
    """The forced summary ended (written, nothing to do, or failed for good)."""
    cache.delete(compact_pending_key(conversation_id))


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


def last_turn_closed(conversation: Conversation) -> bool:
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
    branch: list[HistoryMessage]

    @property
    def lines(self) -> list[HistoryMessage]:
        return [message for turn in self.turns for message in turn.messages]


def _plan(
    conversation: Conversation,
    settings: MemorySettings,
    *,
    model: str,
    force: bool,
    leaf_id: int | None,
) -> _FoldPlan | None:
    branch = branch_messages(conversation, _continued(conversation, leaf_id))
    summary = newest_summary(conversation, branch)
    text = summary.text if summary else ""
    turns = split_turns(lines_after(branch, summary), model=model)
    if not force and not needs_summary(
        summary=text, turns_after_summary=turns, budget=settings.token_budget, model=model
    ):
        return None
    count = choose_cut(
        turns,
        keep_tokens=0 if force else settings.keep_verbatim_tokens,
        last_turn_closed=last_turn_closed(conversation),
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
    return _FoldPlan(summary.pk if summary else None, text, folded, branch)


def _store(
    conversation: Conversation, plan: _FoldPlan, text: str, model: str
) -> MemorySummary | None:
    """Write the new row, or return None if another summariser moved the cut meanwhile."""
    with transaction.atomic():
        # Held only for these few queries, never during the model call: runs take the same
        # row lock to number their events (docs/architecture.md, invariant 3).
        if Conversation.objects.select_for_update().filter(pk=conversation.pk).first() is None:
            return None  # deleted meanwhile
        # Messages are only ever added below a branch, never moved: the plan's lines are
        # still where they were. Another summariser may have cut the branch since, through
        # them or below them (the branch has grown): then this fold is stale.
        branch_now = branch_messages(conversation, _continued(conversation, plan.branch[-1].id))
        newest = newest_summary(conversation, branch_now)
        if (newest.pk if newest else None) != plan.base_summary_id:
            return None
        first, last = plan.lines[0], plan.lines[-1]
        answered_since = (
            last.role == Message.Role.USER
            and Message.objects.filter(parent_id=last.id, role=Message.Role.ASSISTANT).exists()
        )
        if answered_since:
            return None  # the folded turn got its answer meanwhile: plan it again
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
    *,
    conversation: Conversation,
    force: bool = False,
    chat_model: ChatModel | None = None,
    leaf_id: int | None = None,
) -> MemorySummary | None:
    """Fold old turns of the branch ending at ``leaf_id`` (None: the active branch) into its
    summary; the newest row written, or None.

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
    if leaf_id is None:
        leaf_id = active_leaf_id(conversation)

    if _plan(conversation, settings, model=model, force=force, leaf_id=leaf_id) is None:
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
        return _fold(
            conversation,
            settings,
            chat_model,
            model=model,
            force=force,
            usage=usage,
            leaf_id=leaf_id,
        )
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
    leaf_id: int | None,
) -> MemorySummary | None:
    newest = None
    for _ in range(MAX_FOLD_ROUNDS):
        plan = _plan(conversation, settings, model=model, force=force, leaf_id=leaf_id)
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
