"""Conversations and the write path of a chat turn: send, regenerate, edit, cancel, and
Continue on a stopped answer.

A send is one transaction: the user message, a queued run pinned to the profile's current
version, and the ``message.created`` event. The Celery task is enqueued only after commit
(docs/architecture.md), so a worker never looks for a run that is not there yet.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Field
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from agents import events, session_check
from agents.db import rows, statements
from agents.db.rows import instances
from agents.llm.factory import model_name_for
from agents.models import (
    AgentProfile,
    AgentRun,
    Conversation,
    Message,
    PromptVersion,
    RunEvent,
    UsageEntry,
)
from agents.profile_snapshot import ProfileSnapshot, ToolPairs, snapshot_model_config
from agents.protocol import (
    FrameType,
    RefusalCode,
    RequestRefused,
    max_message_chars,
    message_created_payload,
)
from agents.ratelimit import rate_limit_hit
from agents.react.replay import turn_start
from agents.runs.log import conversation_bump_sql, event_append
from agents.runs.portable import ACTIVE_STATUSES
from agents.runs.queue import run_enqueue_on_commit
from agents.runs.reads import run_numbered_steps
from agents.runs.store import run_mark_cancelled
from agents.runs.waits import run_parent_lock
from agents.services.approvals import approvals_cancel
from agents.services.branches import branch_activate
from agents.services.defaults import default_profile
from agents.services.prompt_versions import prompt_version_current
from agents.services.sandbox import sandbox_files_delete_with
from agents.services.usage import (
    QuotaExceeded,
    usage_check_quota,
    usage_entry_reserving,
    usage_refusal,
    usage_reserve,
)
from chatsite.server.db.prepared import prepared_cursor

TITLE_CHARS = 60


class ConversationGone(RequestRefused):
    """The conversation is not there (deleted, or never this user's): nothing was written."""

    def __init__(self) -> None:
        super().__init__(RefusalCode.NOT_FOUND, _("No such conversation."))


@dataclass(frozen=True)
class SendResult:
    message: Message
    run: AgentRun
    created: bool


# --------------------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------------------


def conversation_create(
    *, owner: User, title: str = "", profile: AgentProfile | None = None
) -> Conversation:
    if profile is not None:
        _check_profile_allowed(profile=profile, user=owner)
    return Conversation.objects.create(owner=owner, title=title.strip()[:200], profile=profile)


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title = title.strip()[:200]
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def conversation_set_archived(*, conversation: Conversation, archived: bool) -> Conversation:
    # Not activity: ``updated_at`` stays, so an undone archive returns to its date bucket.
    conversation.archived = archived
    conversation.save(update_fields=["archived"])
    return conversation


def conversation_pin(*, conversation: Conversation) -> Conversation:
    """Pin a conversation to the top of the sidebar; pinning it again keeps its place."""
    if conversation.pinned_at is None:
        conversation.pinned_at = timezone.now()
        conversation.save(update_fields=["pinned_at"])
    return conversation


def conversation_unpin(*, conversation: Conversation) -> Conversation:
    if conversation.pinned_at is not None:
        conversation.pinned_at = None
        conversation.save(update_fields=["pinned_at"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    # Its attached files go with it; their stored bytes once the delete commits
    # (``attachment_bytes_forget``, agents/services/attachments.py).
    # Runs still going notice the missing row at their next write and stop.
    with transaction.atomic():
        sandbox_files_delete_with(conversation_id=conversation.pk)
        conversation.delete()


# The sidebar's select mode acts on at most one page of its list at a time.
BULK_MAX_CONVERSATIONS = 200


def conversations_set_archived(
    *, owner: User, conversation_ids: list[int], archived: bool
) -> list[int]:
    """Archive (or bring back) several of ``owner``'s conversations at once: all or none.

    An id that is not one of the owner's conversations refuses the whole request, naming it.
    Not activity, as for one (``conversation_set_archived``). Answers the ids, in order.
    """
    with transaction.atomic():
        locked = _lock_all_owned(owner=owner, conversation_ids=conversation_ids)
        ids = [conversation.pk for conversation in locked]
        Conversation.objects.filter(pk__in=ids).update(archived=archived)
    return ids


def conversations_delete(*, owner: User, conversation_ids: list[int]) -> list[int]:
    """Delete several of ``owner``'s conversations at once: all or none, as above."""
    with transaction.atomic():
        locked = _lock_all_owned(owner=owner, conversation_ids=conversation_ids)
        ids = [conversation.pk for conversation in locked]
        for conversation in locked:
            conversation_delete(conversation=conversation)
    return ids


def _lock_all_owned(*, owner: User, conversation_ids: list[int]) -> list[Conversation]:
    """Lock every conversation named, in id order (two bulk requests never deadlock), or
    refuse when any is missing or another user's: the caller's transaction writes nothing."""
    wanted = sorted(set(conversation_ids))
    if len(wanted) > BULK_MAX_CONVERSATIONS:
        raise RequestRefused(
            RefusalCode.TOO_LONG,
            _("Choose at most %(limit)s conversations at a time.")
            % {"limit": BULK_MAX_CONVERSATIONS},
        )
    found = list(
        Conversation.objects.select_for_update()
        .filter(pk__in=wanted, owner_id=owner.pk, for_replay=False)
        .order_by("pk")
    )
    missing = sorted(set(wanted) - {conversation.pk for conversation in found})
    if missing:
        raise RequestRefused(
            RefusalCode.NOT_FOUND,
            ngettext(
                "No such conversation: %(ids)s. Nothing was changed.",
                "No such conversations: %(ids)s. Nothing was changed.",
                len(missing),
            )
            % {"ids": ", ".join(str(pk) for pk in missing)},
        )
    return found


# --------------------------------------------------------------------------------------
# Sending
# --------------------------------------------------------------------------------------


def message_send(
    *,
    conversation: Conversation,
    user: User,
    content: str,
    client_id: str | None = None,
    profile: AgentProfile | None = None,
    parent_id: int | None = None,
    signed_in_by: str | None = None,
) -> SendResult:
    """Save a user message and queue a run for it; a repeated ``client_id`` is a no-op.

    The message continues the active branch, or, with ``parent_id``, the branch through that
    message (the one the client shows), which then becomes the active one.
    Raises ``RequestRefused`` (and writes nothing) for bad content, a foreign conversation,
    a ``parent_id`` not in this conversation, the rate limit, the daily token quota, or a
    run already in progress; and ``SignedOut`` if ``signed_in_by``, the key of the session
    that sends (a socket's), no longer signs ``user`` in (read with the conversation's lock).
    """
    return _send(
        conversation=conversation,
        user=user,
        content=content,
        client_id=client_id,
        profile=profile,
        parent_id=parent_id,
        after_active_leaf=parent_id is None,
        signed_in_by=signed_in_by,
    )


def _send(
    *,
    conversation: Conversation,
    user: User,
    content: str,
    client_id: str | None,
    profile: AgentProfile | None,
    parent_id: int | None,
    after_active_leaf: bool,
    edited_from: Message | None = None,
    signed_in_by: str | None = None,
) -> SendResult:
    """``after_active_leaf``: the message continues the active branch; otherwise it is a
    child of ``parent_id`` (None: a new first message, as an edit of the first one is)."""
    _check_content(content)
    client_id = client_id or None
    with transaction.atomic():
        lock = _lock_owned(conversation=conversation, user=user, signed_in_by=signed_in_by)
        locked = lock.conversation
        check_parent = not after_active_leaf and parent_id is not None
        seen = _read_under_lock(
            conversation=locked,
            client_id=client_id,
            parent_id=parent_id if check_parent else None,
        )
        if seen.existing_id is not None:
            existing = Message.objects.get(pk=seen.existing_id)
            return SendResult(message=existing, run=_run_for(existing), created=False)
        if after_active_leaf:
            parent_id = locked.active_leaf_id
        elif check_parent and not seen.parent_found:
            raise RequestRefused(
                RefusalCode.NOT_FOUND,
                _("Message %(id)s is not in this conversation.") % {"id": parent_id},
            )
        profile = _profile_for(conversation=locked, user=user, profile=profile, lock=lock)
        _check_can_start_run(blocking=seen.blocking_status, budgeted=seen.budgeted, user=user)
        extends_active = parent_id == locked.active_leaf_id
        message = Message(
            conversation=locked,
            role=Message.Role.USER,
            content=content,
            client_id=client_id,
            parent_id=parent_id,
            on_active_branch=extends_active,
        )
        if extends_active and statements.fenced_statements_supported():
            run = _queue_run_with_its_message(
                lock=lock,
                message=message,
                profile=profile,
                user=user,
                edited_from=edited_from,
                conversation_fields=_touched(locked, first_message=content, fields=[]),
            )
        else:
            message.save(force_insert=True)
            if not extends_active:
                branch_activate(conversation=locked, leaf_id=message.pk)
            run = _queue_run(lock=lock, message=message, profile=profile, user=user)
            locked.active_leaf = message
            # The conversation's own changes go with the seq bump: one UPDATE of its row.
            event_append(
                conversation=locked,
                run=run,
                type=FrameType.MESSAGE_CREATED,
                payload=message_created_payload(message, edited_from=edited_from),
                conversation_fields=_touched(locked, first_message=content, fields=["active_leaf"]),
            )
    conversation.title, conversation.last_seq = locked.title, locked.last_seq
    conversation.active_leaf_id = locked.active_leaf_id
    return SendResult(message=message, run=run, created=True)


def run_regenerate(*, conversation: Conversation, user: User) -> AgentRun:
    """Queue a new run answering the active branch's latest user message again.

    Its answer will be a sibling of the earlier ones, which stay; until it comes, the branch
    ends at the question (``branch_activate``).
    """

    def latest_question(locked: Conversation) -> Message:
        message = (
            locked.messages.filter(role=Message.Role.USER, on_active_branch=True)
            .order_by("-id")
            .first()
        )
        if message is None:
            raise RequestRefused(
                RefusalCode.NOTHING_TO_REGENERATE, _("There is no message to answer again.")
            )
        return message

    return _answer_again(conversation=conversation, user=user, question=latest_question)


def _answer_again(
    *,
    conversation: Conversation,
    user: User,
    question: Callable[[Conversation], Message],
    forked_from: AgentRun | None = None,
    fork_before_seq: int | None = None,
    continues_answer: Message | None = None,
) -> AgentRun:
    """Queue a new run answering again the message ``question`` finds in the conversation
    (read under its lock), under a send's rules: the profile the user may use, no unfinished
    run, the quota and the budgets. The new answer will be a sibling of the earlier ones;
    until it comes, the active branch ends at the question (``branch_activate``). Regenerate,
    "Retry from here" and Continue differ only in the question and what the run is told."""
    with transaction.atomic():
        lock = _lock_owned(conversation=conversation, user=user)
        locked = lock.conversation
        message = question(locked)
        profile = _profile_for(conversation=locked, user=user, profile=None, lock=lock)
        seen = _read_under_lock(conversation=locked, client_id=None, parent_id=None)
        _check_can_start_run(blocking=seen.blocking_status, budgeted=seen.budgeted, user=user)
        branch_activate(conversation=locked, leaf_id=message.pk)
        run = _queue_run(
            lock=lock,
            message=message,
            profile=profile,
            user=user,
            forked_from=forked_from,
            fork_before_seq=fork_before_seq,
            continues_answer=continues_answer,
        )
        _touch(locked)
    conversation.active_leaf_id = locked.active_leaf_id
    return run


def run_fork(*, run: AgentRun, user: User, step_seq: int) -> AgentRun:
    """ "Retry from here": queue a new run answering ``run``'s question again that starts with
    ``run``'s steps before the turn holding the step stored at ``step_seq``, and calls the
    model from there (``run_fork_reused_steps``, ``agents/runs/reads.py``).

    The reused steps keep their observations: no tool is called again for them. Like a
    regenerate, the new answer is a sibling of the earlier ones, on a branch of its own that
    becomes the active one; until it comes, the branch ends at the question.
    """
    conversation = run.conversation
    if conversation.owner_id != user.pk or conversation.for_replay:
        raise RequestRefused(RefusalCode.NOT_FOUND, _("No such run."))
    if not run.is_terminal:
        raise RequestRefused(
            RefusalCode.NOT_FORKABLE, _("Only a run that has ended can be retried from a step.")
        )
    if run.is_replay:
        raise RequestRefused(RefusalCode.NOT_FORKABLE, _("A replay cannot be retried."))
    numbered = run_numbered_steps(run=run)
    seqs = [seq for seq, _step in numbered]
    if step_seq not in seqs:
        raise RequestRefused(
            RefusalCode.NOT_FORKABLE,
            _("Step %(seq)s is not a step of run %(run)s.") % {"seq": step_seq, "run": run.pk},
        )
    start = turn_start([step for _seq, step in numbered], seqs.index(step_seq))
    return _answer_again(
        conversation=conversation,
        user=user,
        question=lambda _locked: run.trigger_message,
        forked_from=run,
        fork_before_seq=seqs[start],
    )


def answer_continue(*, message: Message, user: User) -> AgentRun:
    """ "Continue" on an answer its owner stopped: queue a new run answering the same
    question that is shown the stopped text and asked for the rest (``_prepare``,
    agents/services/execution.py). Its answer is the stopped text followed by the rest, as
    one message: like a regenerate's, a sibling of the stopped one, which stays one switch
    away, on the branch that becomes the active one; until it comes the branch ends at the
    question (docs/architecture.md, "The message tree").
    """
    conversation = message.conversation
    if conversation.owner_id != user.pk:
        raise RequestRefused(RefusalCode.NOT_FOUND, _("No such message."))
    stopped = message.run
    if (
        message.role != Message.Role.ASSISTANT
        or stopped is None
        or stopped.status != AgentRun.Status.CANCELLED
        or message.parent_id is None
        or not message.content.strip()
    ):
        raise RequestRefused(
            RefusalCode.NOT_CONTINUABLE, _("Only an answer you stopped can be continued.")
        )
    # A message's parent never changes: it may be read before the lock.
    question = Message.objects.get(pk=message.parent_id)
    return _answer_again(
        conversation=conversation,
        user=user,
        question=lambda _locked: question,
        continues_answer=message,
    )


def message_edit_resend(
    *, message: Message, user: User, content: str, client_id: str | None = None
) -> SendResult:
    """Send an edited copy of one of the user's own messages: a sibling of it (same parent),
    on a new branch that becomes the active one.

    The original and its continuation stay, one switch away; the new message's
    ``message.created`` event names the original in ``edited_from``.
    """
    conversation = message.conversation
    if conversation.owner_id != user.pk:
        raise RequestRefused(RefusalCode.NOT_FOUND, _("No such message."))
    if message.role != Message.Role.USER:
        raise RequestRefused(RefusalCode.NOT_EDITABLE, _("Only your own messages can be edited."))
    return _send(
        conversation=conversation,
        user=user,
        content=content,
        client_id=client_id,
        profile=None,
        parent_id=message.parent_id,
        after_active_leaf=False,
        edited_from=message,
    )


def run_cancel(*, run: AgentRun, user: User) -> AgentRun:
    """Cancel a run: a queued one ends at once, a running one is asked to stop.

    The worker polls ``cancel_requested_at`` and stops within a second, keeping the partial
    answer. Cancelling a run that already ended changes nothing.
    """
    if run.conversation.owner_id != user.pk:
        raise RequestRefused(RefusalCode.NOT_FOUND, _("No such run."))
    with transaction.atomic():
        # A child's parent first, as every end of a child locks them (agents/runs/waits.py).
        run_parent_lock(run=run)
        _cancel_with_children(run.pk, user)
    run.refresh_from_db()
    return run


def _cancel_with_children(run_id: int, user: User) -> None:
    """Cancel one run and every unfinished run it delegated to, however deep (each child
    is cancelled as its owner's Stop would: at once if queued or paused, else asked). A
    parent that waits for its children ends here too: their ends find it ended."""
    locked = AgentRun.objects.select_for_update().get(pk=run_id)
    if locked.status in (AgentRun.Status.QUEUED, *AgentRun.PAUSED_STATUSES):
        # Queued or paused: no worker holds it, so it ends here.
        if locked.status == AgentRun.Status.AWAITING_APPROVAL:
            approvals_cancel(run=locked, user=user)
        run_mark_cancelled(run=locked, partial_answer="")
    elif locked.status == AgentRun.Status.RUNNING and locked.cancel_requested_at is None:
        locked.cancel_requested_at = timezone.now()
        locked.save(update_fields=["cancel_requested_at"])
    children = AgentRun.objects.filter(parent_run_id=run_id).exclude(
        status__in=AgentRun.TERMINAL_STATUSES
    )
    for child_id in children.values_list("pk", flat=True):
        _cancel_with_children(child_id, user)


# --------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------


def _check_content(content: str) -> None:
    if not content or not content.strip():
        raise RequestRefused(RefusalCode.EMPTY, _("The message is empty."))
    limit = max_message_chars()
    if len(content) > limit:
        raise RequestRefused(
            RefusalCode.TOO_LONG,
            _("The message is longer than %(limit)s characters.") % {"limit": limit},
        )


@dataclass(frozen=True)
class _Locked:
    conversation: Conversation
    # The default profile, read with the lock when the conversation has none of its own.
    default_profile: AgentProfile | None
    # The latest prompt version of the profile read with the lock (None: it has none).
    latest_version: PromptVersion | None
    # The profile read with the lock (None: there was none) and its tools, by name (None:
    # not read with the lock, on a database other than PostgreSQL and SQLite).
    profile_id: int | None
    tools: ToolPairs | None
    # Whether the user may use the profile read with the lock (None: there was none).
    profile_allowed: bool | None

    def latest_version_of(self, profile: AgentProfile) -> PromptVersion | None:
        """The latest version read with the lock, if ``profile`` is the one it belongs to."""
        version = self.latest_version
        return version if version is not None and version.profile_id == profile.pk else None

    def tools_of(self, profile: AgentProfile) -> ToolPairs | None:
        """The tools read with the lock, if ``profile`` is the one they belong to."""
        return self.tools if profile.pk is not None and profile.pk == self.profile_id else None

    def allowed_of(self, profile: AgentProfile) -> bool | None:
        """Whether the user may use ``profile``, if it is the one read with the lock."""
        if profile.pk is None or profile.pk != self.profile_id:
            return None
        return self.profile_allowed


def _lock_owned(
    *, conversation: Conversation, user: User, signed_in_by: str | None = None
) -> _Locked:
    """Lock the user's conversation row; with it, in the same statement, the profile a run
    would use (the conversation's, else the default one), that profile's model endpoint, its
    latest prompt version, its tools (what ``prompt_version_current`` compares) and whether
    the user may use it (``_check_profile_allowed``); and, with ``signed_in_by``, whether
    that session still signs the user in (``agents/session_check.py``), or ``SignedOut``.

    Plain SQL: every send runs it, and the ORM's version (``select_for_update`` with
    ``select_related``) cost daphne several times as much to build as to run
    (docs/performance.md#send).
    """
    with_session = signed_in_by is not None and session_check.decided_here()
    session_params: list[Any] = []
    if with_session:
        session_params = session_check.signs_in_params(cast(str, signed_in_by))
    elif signed_in_by is not None and not session_check.session_signs_in(
        session_key=signed_in_by, user_id=user.pk
    ):
        raise session_check.SignedOut
    with prepared_cursor() as cursor:
        cursor.execute(
            statements.conversation_lock(with_session=with_session),
            [user.pk, *session_params, conversation.pk, user.pk],
        )
        row = cursor.fetchone()
    if row is None:
        raise ConversationGone
    # The models' columns, then whether the profile is allowed, its tools, and the session's
    # data with the user's password and is_active.
    parts = instances(statements.LOCKED_MODELS, row)
    allowed, tools, *session = row[_locked_columns() :]
    if with_session and not session_check.signs_in_read(
        session_key=cast(str, signed_in_by), user_id=user.pk, values=session
    ):
        raise session_check.SignedOut
    locked = cast(Conversation, parts[0])
    profile = cast(AgentProfile | None, parts[1])
    latest = cast(PromptVersion | None, parts[3])
    if profile is not None:
        AgentProfile._meta.get_field("model_config").set_cached_value(profile, parts[2])
    if locked.profile_id is not None:
        Conversation._meta.get_field("profile").set_cached_value(locked, profile)
    return _Locked(
        conversation=locked,
        default_profile=profile if locked.profile_id is None else None,
        latest_version=latest,
        profile_id=profile.pk if profile is not None else None,
        tools=_tool_pairs(tools),
        profile_allowed=bool(allowed) if profile is not None else None,
    )


@functools.cache
def _locked_columns() -> int:
    return sum(len(model._meta.concrete_fields) for model in statements.LOCKED_MODELS)


def _tool_pairs(value: str | None) -> ToolPairs | None:
    if value is None:
        return None
    return [(tool_id, name) for tool_id, name in json.loads(value)]


@dataclass(frozen=True)
class _UnderLock:
    existing_id: int | None  # the message already sent with this client_id
    parent_found: bool  # the parent asked for is a message of this conversation
    blocking_status: str | None  # the status of a run that keeps a new one from starting
    budgeted: bool  # a monthly budget applies to the user (agents/services/usage.py)


def _read_under_lock(
    *, conversation: Conversation, client_id: str | None, parent_id: int | None
) -> _UnderLock:
    """What a send must know of the conversation's messages and runs, in one statement.

    Read after the row lock is taken, not in the locking statement: on PostgreSQL a
    statement that waited for the lock still reads with the snapshot it started with, and
    would not see the message or the run that the send it waited for had just committed.
    """
    # Plain SQL: every send runs it, and building it through the ORM cost daphne far more than
    # running it does (docs/performance.md#send).
    # A paused run (waiting for an approval or a Continue) blocks sends as a running one does.
    unfinished = [str(status) for status in (*ACTIVE_STATUSES, *AgentRun.PAUSED_STATUSES)]
    params: list[Any] = [conversation.pk, *unfinished]
    if client_id is not None:
        params += [conversation.pk, client_id]
    if parent_id is not None:
        params += [conversation.pk, parent_id]
    params += [conversation.owner_id, conversation.owner_id]  # the sender: its budgets
    sql = statements.send_reads_under_lock(
        unfinished=len(unfinished), client_id=client_id is not None, parent=parent_id is not None
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    blocking, *rest = row
    existing = rest.pop(0) if client_id is not None else None
    parent_found = bool(rest.pop(0)) if parent_id is not None else False
    budgeted = bool(rest.pop(0))
    return _UnderLock(
        existing_id=existing,
        parent_found=parent_found,
        blocking_status=blocking,
        budgeted=budgeted,
    )


def _check_can_start_run(*, blocking: str | None, budgeted: bool, user: User) -> None:
    """Checks in order of what the user can do about them: wait for the run, then limits.

    ``blocking``: the status of an unfinished run of the conversation (``_read_under_lock``);
    ``budgeted``: whether a monthly budget applies to the user (read with it).
    The quota is checked again, under a lock, when ``_queue_run`` reserves the run's share.
    """
    if blocking in AgentRun.OWNER_PAUSED_STATUSES:
        raise RequestRefused(
            RefusalCode.RUN_IN_PROGRESS,
            _("The agent is waiting for you: approve or deny its call, continue it, or stop it."),
        )
    if blocking is not None:
        raise RequestRefused(
            RefusalCode.RUN_IN_PROGRESS, _("Wait for the current answer, or stop it.")
        )
    try:
        usage_check_quota(user_id=user.pk, budgeted=budgeted)
    except QuotaExceeded as exceeded:
        raise usage_refusal(exceeded) from None
    _count_send_against_rate_limit(user)


def _count_send_against_rate_limit(user: User) -> None:
    """A sliding one-minute window per user, shared by every door (agents/ratelimit.py)."""
    limit = settings.CHAT_SENDS_PER_MINUTE
    decision = rate_limit_hit(action="send", user_id=user.pk, limit=limit)
    if not decision.allowed:
        raise RequestRefused(
            RefusalCode.RATE_LIMITED,
            _("At most %(limit)s messages a minute; try again soon.") % {"limit": limit},
            retry_after=decision.retry_after,
        )


def _check_profile_allowed(
    *, profile: AgentProfile, user: User, lock: _Locked | None = None
) -> None:
    """A profile limited to some groups is for their members only: decided with the lock
    when that read the same profile, else by one statement (plain SQL, on every send: the
    ORM's version cost several times as much to build as to run; docs/performance.md#send)."""
    allowed = lock.allowed_of(profile) if lock is not None else None
    if allowed is None:
        with prepared_cursor() as cursor:
            cursor.execute(statements.profile_allowed(), [user.pk, profile.pk, profile.pk])
            (allowed,) = cursor.fetchone()
    if not allowed:
        raise RequestRefused(
            RefusalCode.PROFILE_NOT_ALLOWED, _("That agent is not available to you.")
        )


def _profile_for(
    *,
    conversation: Conversation,
    user: User,
    profile: AgentProfile | None,
    lock: _Locked,
) -> AgentProfile:
    """The profile a new run uses: the one asked for, the conversation's, or the default
    (read with the conversation's lock, if there was one)."""
    chosen = profile or conversation.profile or lock.default_profile or default_profile()
    _check_profile_allowed(profile=chosen, user=user, lock=lock)
    if profile is not None and conversation.profile_id != profile.pk:
        conversation.profile = profile
        conversation.save(update_fields=["profile"])
    return chosen


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


def _queue_run(
    *,
    lock: _Locked,
    message: Message,
    profile: AgentProfile,
    user: User,
    forked_from: AgentRun | None = None,
    fork_before_seq: int | None = None,
    continues_answer: Message | None = None,
) -> AgentRun:
    run = _new_run(lock=lock, message=message, profile=profile)
    run.forked_from, run.fork_before_seq = forked_from, fork_before_seq
    run.continues_answer = continues_answer
    run.save(force_insert=True)
    try:
        usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.RUN, run=run)
    except QuotaExceeded as exceeded:
        raise usage_refusal(exceeded) from None  # rolls the message and the run back
    run_enqueue_on_commit(run_id=run.pk)
    return run


def _queue_run_with_its_message(
    *,
    lock: _Locked,
    message: Message,
    profile: AgentProfile,
    user: User,
    edited_from: Message | None,
    conversation_fields: dict[str, Any],
) -> AgentRun:
    """The rest of a send that continues the active branch, on PostgreSQL, as one statement
    (CTEs, each row taking the ids of those before): the new ``message``, its queued run
    and the run's ledger entry (``_queue_run``), the conversation's one UPDATE (the seq
    bump, ``conversation_fields``, the branch's end moved to the message) and
    ``message.created``, the message's id written into its payload. The ORM sent four
    INSERTs and an UPDATE, each parsed and planned every time; this is prepared once per
    connection (chatsite/server/db/prepared.py)."""
    conversation = lock.conversation
    run = _new_run(lock=lock, message=message, profile=profile)
    try:
        entry = usage_entry_reserving(user_id=user.pk, run=run)
    except QuotaExceeded as exceeded:
        raise usage_refusal(exceeded) from None
    message_sql, message_params = rows.insert(message)  # sets created_at, as save() would
    run_sql, run_params = rows.insert(
        run, computed={"trigger_message_id": "(SELECT id FROM new_message)"}
    )
    entry_sql, entry_params = rows.insert(entry, computed={"run_id": "(SELECT id FROM new_run)"})
    bump_sql, bump_params = conversation_bump_sql(
        conversation_fields, computed={"active_leaf": "(SELECT id FROM new_message)"}
    )
    payload = message_created_payload(message, edited_from=edited_from)  # its id: below
    sql = statements.send_continuing_active_branch(
        message_insert=message_sql,
        run_insert=run_sql,
        entry_insert=entry_sql,
        conversation_bump=bump_sql,
    )
    params = [
        *message_params,
        *run_params,
        *entry_params,
        1,
        *bump_params,
        conversation.pk,
        conversation.pk,
        str(FrameType.MESSAGE_CREATED),
        json.dumps(payload),
    ]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        message_id, run_id, entry_id, event_id, seq, event_created_at = cursor.fetchone()
    rows.mark_saved(message, message_id)
    run.trigger_message = message
    rows.mark_saved(run, run_id)
    entry.run_id = run_id
    rows.mark_saved(entry, entry_id)
    conversation.active_leaf = message
    conversation.last_seq = seq
    payload["message"]["id"] = message_id
    event = RunEvent(
        pk=event_id,
        conversation=conversation,
        run=run,
        seq=seq,
        type=FrameType.MESSAGE_CREATED,
        payload=payload,
        created_at=event_created_at,
    )
    events.publish_on_commit([event])
    run_enqueue_on_commit(run_id=run.pk)
    return run


def _new_run(*, lock: _Locked, message: Message, profile: AgentProfile) -> AgentRun:
    """The queued run answering ``message``, pinned to the profile's current version and its
    model endpoint; not yet written."""
    version = prompt_version_current(
        profile=profile, latest=lock.latest_version_of(profile), tools=lock.tools_of(profile)
    )
    snapshot = ProfileSnapshot.from_version(version)
    if snapshot.model_config_id is not None and snapshot.model_config_id == profile.model_config_id:
        model_config = profile.model_config  # read with the profile (select_related)
    else:
        model_config = snapshot_model_config(snapshot)
    return AgentRun(
        conversation=lock.conversation,
        trigger_message=message,
        profile_version=version,
        model_config=model_config,
        model_name=model_name_for(model_config),
        mode=snapshot.mode,
    )


def _run_for(message: Message) -> AgentRun:
    return message.triggered_runs.latest("id")


def _touch(conversation: Conversation) -> None:
    conversation.save(update_fields=["updated_at"])


def _touched(
    conversation: Conversation, *, first_message: str, fields: list[str]
) -> dict[str, Any]:
    """What ``save(update_fields=...)`` would write for a turn: the activity time, the
    ``fields`` named, and the title from the first message if there is none yet."""
    conversation.updated_at = timezone.now()
    if first_message and not conversation.title:
        conversation.title = _title_from(first_message)
        fields = [*fields, "title"]
    return {
        name: getattr(
            conversation, cast("Field[Any, Any]", Conversation._meta.get_field(name)).attname
        )
        for name in ["updated_at", *fields]
    }


def _title_from(content: str) -> str:
    line = " ".join(content.split())
    if len(line) <= TITLE_CHARS:
        return line
    return line[: TITLE_CHARS - 1].rsplit(" ", 1)[0] + "…"
