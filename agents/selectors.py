"""Reads, scoped to the user asking: a foreign id looks exactly like a missing one.

The run inspector's reads at the end serve the admin, where staff read every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from django.contrib.auth.models import AnonymousUser, User
from django.db import DEFAULT_DB_ALIAS
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
    Window,
)
from django.db.models.functions import Concat, Greatest, RowNumber, StrIndex, Substr, Upper
from django.db.models.lookups import GreaterThan

from agents.db import statements
from agents.db.rows import StoredEvent, column_converter, instance
from agents.models import (
    AgentProfile,
    AgentRun,
    AnswerFeedback,
    ApiKey,
    Conversation,
    ConversationFolder,
    ConversationShare,
    EvalResult,
    EvalRun,
    Message,
    ModelCall,
    Notification,
    NotificationPreference,
    RunEvent,
    SandboxFile,
    Schedule,
    ScheduleFiring,
    ToolApproval,
    ToolConfig,
    UserPreference,
    Webhook,
    WebhookDelivery,
)
from chatsite.server.db.prepared import prepared_cursor


def conversation_list(
    *, user: User | AnonymousUser, q: str = "", archived: bool = False
) -> QuerySet[Conversation]:
    """The user's conversations: pinned first (latest pin on top), then most recently active.

    Each row carries ``has_active_run``; with ``q`` (searched in title and text) each also
    carries ``match_excerpt``, a window of its newest matching message around the match
    (None when only the title matched). Both are subqueries, so a page costs one query.
    """
    # A replay's copy of a conversation (agents/services/replays.py) is no chat of its owner.
    conversations = Conversation.objects.filter(
        owner_id=user.pk, archived=archived, for_replay=False
    ).annotate(
        has_active_run=Exists(
            AgentRun.objects.filter(
                conversation=OuterRef("pk"),
                status__in=AgentRun.ACTIVE_STATUSES,
            )
        )
    )
    q = q.strip()
    if q:
        # Only the branch shown: earlier versions are one switch away, not search results.
        matching_messages = Message.objects.filter(content__icontains=q, on_active_branch=True)
        conversations = conversations.filter(
            Q(title__icontains=q) | Q(pk__in=matching_messages.values("conversation_id"))
        ).annotate(match_excerpt=_match_excerpt(matching_messages, q))
    return conversations.select_related("profile").order_by(
        F("pinned_at").desc(nulls_last=True), "-updated_at", "-pk"
    )


# Characters of context kept before a match; the excerpt is long enough for any snippet.
_EXCERPT_BEFORE = 80
_EXCERPT_CHARS = 400


def _match_excerpt(messages: QuerySet[Message], q: str) -> Subquery:
    """The newest matching message of the outer conversation, cut around the match in SQL
    (UPPER on both sides, as ``icontains`` does) so a long answer never leaves the database."""
    position = StrIndex(Upper("content"), Upper(Value(q)))
    start = Greatest(position - _EXCERPT_BEFORE, Value(1))
    return Subquery(
        messages.filter(conversation=OuterRef("pk"))
        .order_by("-id")
        .annotate(
            excerpt=Concat(
                Case(When(GreaterThan(start, 1), then=Value("…")), default=Value("")),
                Substr("content", start, _EXCERPT_CHARS + len(q)),
            )
        )
        .values("excerpt")[:1]
    )


def conversation_has_active_run(*, conversation: Conversation) -> bool:
    return AgentRun.objects.filter(
        conversation=conversation, status__in=AgentRun.ACTIVE_STATUSES
    ).exists()


def conversation_get(*, user: User | AnonymousUser, conversation_id: int) -> Conversation | None:
    return (
        Conversation.objects.filter(pk=conversation_id, owner_id=user.pk, for_replay=False)
        .select_related("profile")
        .first()
    )


def conversations_owned(
    *, user: User | AnonymousUser, conversation_ids: list[int]
) -> QuerySet[Conversation]:
    """Those of ``conversation_ids`` that are the user's own chats (a bulk action's rows)."""
    return Conversation.objects.filter(
        pk__in=conversation_ids, owner_id=user.pk, for_replay=False
    ).order_by("pk")


def folder_list(*, user: User | AnonymousUser) -> QuerySet[ConversationFolder]:
    """The user's folders, by name."""
    return ConversationFolder.objects.filter(owner_id=user.pk).order_by("name", "pk")


def folder_get(*, user: User | AnonymousUser, folder_id: int) -> ConversationFolder | None:
    return ConversationFolder.objects.filter(pk=folder_id, owner_id=user.pk).first()


def conversation_last_seq(*, user: User | AnonymousUser, conversation_id: int) -> int | None:
    """The conversation's last ``seq`` if ``user`` owns it, else None (or it is gone).

    What a socket reads on every connect, resume and gap: one column, as plain SQL, which
    costs a fraction of what building the query through the ORM does
    (docs/performance.md#replay-rows).
    """
    if user.pk is None:
        return None
    with prepared_cursor() as cursor:
        cursor.execute(statements.conversation_last_seq(), [conversation_id, user.pk])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def events_after(
    *, conversation: Conversation, after_seq: int, limit: int | None = None
) -> QuerySet[RunEvent]:
    """Stored events with ``seq > after_seq``, oldest first: what a reconnecting client missed."""
    events = RunEvent.objects.filter(conversation=conversation, seq__gt=after_seq).order_by("seq")
    return events[:limit] if limit is not None else events


def event_rows_after(*, conversation_id: int, after_seq: int, limit: int) -> list[StoredEvent]:
    """``events_after`` as a socket's replay reads it: a page of plain rows, not models.

    Plain SQL, with the ORM's conversions: a connect, a resume and a gap each read a page,
    and building the query through the ORM cost daphne more than running it.
    """
    names = StoredEvent._fields
    with prepared_cursor() as cursor:
        cursor.execute(statements.events_after(names), [conversation_id, after_seq, limit])
        rows = cursor.fetchall()
    convert = [column_converter(RunEvent, name) for name in names]
    return [
        StoredEvent._make(step(value) for step, value in zip(convert, row, strict=True))
        for row in rows
    ]


def message_list(*, conversation: Conversation, all_branches: bool = False) -> QuerySet[Message]:
    """The messages of the conversation's active branch, oldest first; with ``all_branches``
    every message of the tree, in the order they were written."""
    messages = Message.objects.filter(conversation=conversation)
    if not all_branches:
        messages = messages.filter(on_active_branch=True)
    return messages.order_by("id")


# --- the message tree ------------------------------------------------------------------
# Each message names its parent (agents/models.py); a branch is the path from a first
# message down to a leaf. Walking it is one recursive query, on PostgreSQL and SQLite alike.


def _branch_rows(
    *, conversation: Conversation, leaf_id: int | None, columns: tuple[str, ...]
) -> list[tuple[Any, ...]]:
    if leaf_id is None:
        return []
    with prepared_cursor() as cursor:
        cursor.execute(statements.branch(columns), [leaf_id, conversation.pk])
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


def branch_ids(*, conversation: Conversation, leaf_id: int | None) -> list[int]:
    """The ids from the first message down to ``leaf_id`` (included), oldest first; empty
    when ``leaf_id`` is None or not a message of this conversation. One query."""
    rows = _branch_rows(conversation=conversation, leaf_id=leaf_id, columns=("id",))
    return [row[0] for row in rows]


def branch_lines(*, conversation: Conversation, leaf_id: int | None) -> list[tuple[int, str, str]]:
    """``(id, role, content)`` of each message from the first down to ``leaf_id``, oldest
    first: what memory reads of one branch, and nothing of any other. One query."""
    rows = _branch_rows(
        conversation=conversation, leaf_id=leaf_id, columns=("id", "role", "content")
    )
    return [(pk, role, content) for pk, role, content in rows]


def branch_newest_leaf(*, conversation: Conversation, message_id: int) -> int | None:
    """The leaf a switch to ``message_id`` shows: the newest message below it (itself if it
    has none). Children are written after their parents, so the newest is always a leaf.
    None when the message is not in this conversation."""
    with prepared_cursor() as cursor:
        cursor.execute(statements.branch_newest_leaf(), [message_id, conversation.pk])
        row = cursor.fetchone()
    return row[0] if row else None


@dataclass(frozen=True)
class TreeNode:
    id: int
    parent_id: int | None
    role: str
    run_id: int | None


@dataclass(frozen=True)
class Tree:
    """Every message of a conversation as a node, and the message its shown branch ends at,
    read together: the leaf is always one of the nodes (or None)."""

    nodes: list[TreeNode]
    active_leaf_id: int | None


def conversation_tree(*, conversation: Conversation) -> Tree:
    """Every message of the conversation as a node (no text), in the order written, and the
    active leaf as stored now: what the chat page needs to draw any branch from the stored
    frames. One query, so the leaf cannot be older or newer than the nodes (a run that ends,
    or a switch in another tab, moves it)."""
    rows = list(
        Message.objects.filter(conversation=conversation)
        .order_by("id")
        .values_list("id", "parent_id", "role", "run_id", "conversation__active_leaf_id")
    )
    nodes = [TreeNode(*row[:4]) for row in rows]
    return Tree(nodes=nodes, active_leaf_id=rows[0][4] if rows else None)


def run_triggers(*, conversation: Conversation) -> dict[int, int]:
    """Each run of the conversation and the user message it answers. One query."""
    # A sub-agent's run is drawn under its parent's call, not after the question.
    runs = AgentRun.objects.filter(conversation=conversation, parent_run__isnull=True)
    return dict(runs.values_list("id", "trigger_message_id"))


@dataclass(frozen=True)
class BranchView:
    """What the active branch shows: its messages, and the runs drawn between them."""

    message_ids: frozenset[int]
    run_ids: frozenset[int]


def active_branch_view(*, conversation: Conversation) -> BranchView:
    """The active branch's messages and the runs it shows: those that wrote its answers,
    and after a user message with no answer on the branch, its newest run if that is newer
    than every answer it has (a failed or stopped attempt, or one still going). The chat page
    draws the same (static/js/thread.js), and the sub-agent runs under them. Two queries,
    and one per level of sub-agents."""
    branch = list(
        Message.objects.filter(conversation=conversation, on_active_branch=True)
        .order_by("id")
        .values_list("id", "role", "run_id")
    )
    shown = {run_id for _, role, run_id in branch if run_id is not None}
    answered = {
        branch[i][0] for i in range(len(branch) - 1) if branch[i + 1][1] == Message.Role.ASSISTANT
    }
    open_questions = [
        pk for pk, role, _ in branch if role == Message.Role.USER and pk not in answered
    ]
    if open_questions:
        newest_run: dict[int, int] = {}
        newest_answered_run: dict[int, int] = {}
        runs = AgentRun.objects.filter(
            trigger_message_id__in=open_questions, parent_run__isnull=True
        ).values_list("id", "trigger_message_id", "answer__id")
        for run_id, trigger_id, answer_id in runs:
            target = newest_answered_run if answer_id is not None else newest_run
            target[trigger_id] = max(target.get(trigger_id, 0), run_id)
        shown.update(
            run_id
            for trigger_id, run_id in newest_run.items()
            if run_id > newest_answered_run.get(trigger_id, 0)
        )
    # The sub-agents' runs of the runs shown, drawn under them (one query per level).
    parents = set(shown)
    while parents:
        parents = set(
            AgentRun.objects.filter(parent_run_id__in=parents).values_list("id", flat=True)
        )
        shown |= parents
    return BranchView(message_ids=frozenset(pk for pk, _, _ in branch), run_ids=frozenset(shown))


def runs_paused_exist() -> bool:
    """Whether any run waits paused (for its owner, or for its sub-agents): only then can
    the sweep's expiries and repairs find anything to do."""
    return AgentRun.objects.filter(status__in=AgentRun.PAUSED_STATUSES).exists()


def run_get(*, user: User | AnonymousUser, run_id: int) -> AgentRun | None:
    return (
        AgentRun.objects.filter(pk=run_id, conversation__owner_id=user.pk)
        .select_related("conversation")
        .first()
    )


def approval_get(*, user: User | AnonymousUser, approval_id: int) -> ToolApproval | None:
    """A paused tool call of one of the user's runs."""
    return (
        ToolApproval.objects.filter(pk=approval_id, run__conversation__owner_id=user.pk)
        .select_related("run")
        .first()
    )


def run_approvals(*, run: AgentRun) -> QuerySet[ToolApproval]:
    """The calls a run paused for and who decided what, for the run inspector (staff)."""
    return run.approvals.select_related("decided_by").order_by("requested_at", "pk")


def message_get(*, user: User | AnonymousUser, message_id: int) -> Message | None:
    return (
        Message.objects.filter(pk=message_id, conversation__owner_id=user.pk)
        .select_related("conversation")
        .first()
    )


def profile_get(*, user: User | AnonymousUser, slug: str) -> AgentProfile | None:
    """A profile by slug, if this user may use it."""
    return profiles_for_user(user=user).filter(slug=slug).first()


def profiles_for_user(*, user: User | AnonymousUser) -> QuerySet[AgentProfile]:
    """Profiles open to everyone, plus those restricted to a group the user is in."""
    if not user.is_authenticated:
        return AgentProfile.objects.none()
    open_to_all = Q(allowed_groups__isnull=True)
    in_group = Q(allowed_groups__in=user.groups.all())
    return (
        AgentProfile.objects.filter(open_to_all | in_group)
        .distinct()
        .order_by("-is_default", "name")
    )


# --- message_search: added by the tools helper for the conversation_search tool ---------


def message_search(
    *,
    user: User | AnonymousUser,
    q: str,
    exclude_conversation_id: int | None = None,
    limit: int = 5,
) -> list[Message]:
    """The user's own messages where every word of ``q`` is in the text or the conversation
    title, newest first, with ``conversation`` loaded. Never another user's messages."""
    words = q.split()[:8]
    if not words or not getattr(user, "pk", None):
        return []
    messages = Message.objects.filter(
        conversation__owner_id=user.pk, conversation__for_replay=False, on_active_branch=True
    )
    if exclude_conversation_id is not None:
        messages = messages.exclude(conversation_id=exclude_conversation_id)
    for word in words:
        messages = messages.filter(
            Q(content__icontains=word) | Q(conversation__title__icontains=word)
        )
    return list(messages.select_related("conversation").order_by("-created_at", "-id")[:limit])


# --- the run inspector (the admin: staff read any run) ---------------------------------


def run_event_list(*, run: AgentRun) -> QuerySet[RunEvent]:
    """A run's stored events, in log order."""
    return RunEvent.objects.filter(run=run).order_by("seq")


def model_call_list(*, run: AgentRun) -> QuerySet[ModelCall]:
    """Every model call of a run with what was sent and what came back, in call order."""
    return ModelCall.objects.filter(run=run).order_by("index")


# --- feedback on answers ------------------------------------------------------------------


def feedback_get(*, user: User, message: Message) -> AnswerFeedback | None:
    return AnswerFeedback.objects.filter(message=message, user=user).first()


def feedback_by_message(*, user: User, conversation: Conversation) -> dict[int, dict[str, str]]:
    """This user's feedback on the conversation's answers, by message id, in one query."""
    rows = AnswerFeedback.objects.filter(user=user, message__conversation=conversation).values_list(
        "message_id", "rating", "comment"
    )
    return {
        message_id: {"rating": rating, "comment": comment} for message_id, rating, comment in rows
    }


@dataclass
class VersionFeedback:
    """How readers rated the answers of one prompt version."""

    profile_id: int | None
    profile_name: str
    version_number: int | None
    count: int
    thumbs_up: int
    latest_comments: list[AnswerFeedback] = field(default_factory=list)

    @property
    def thumbs_down(self) -> int:
        return self.count - self.thumbs_up

    @property
    def up_share(self) -> float:
        return self.thumbs_up / self.count if self.count else 0.0


def feedback_stats(
    *, profile: AgentProfile | None = None, comments_per_version: int = 5
) -> list[VersionFeedback]:
    """Feedback counts per profile and prompt version, newest version first, each with its
    latest comments; two queries however much feedback there is. For staff (the admin)."""
    feedback = AnswerFeedback.objects.all()
    if profile is not None:
        feedback = feedback.filter(profile=profile)
    groups = (
        feedback.values(
            "profile_id", "profile__name", "prompt_version_id", "prompt_version__number"
        )
        .annotate(count=Count("id"), thumbs_up=Count("id", filter=Q(rating="up")))
        .order_by("profile__name", "profile_id", "-prompt_version__number")
    )
    stats: dict[tuple[int | None, int | None], VersionFeedback] = {}
    for row in groups:
        stats[row["profile_id"], row["prompt_version_id"]] = VersionFeedback(
            profile_id=row["profile_id"],
            profile_name=row["profile__name"] or "(deleted profile)",
            version_number=row["prompt_version__number"],
            count=row["count"],
            thumbs_up=row["thumbs_up"],
        )
    # Each version's newest comments, ranked within its version by the database, so a
    # version with many recent comments never crowds out another's older ones.
    newest_first = [F("updated_at").desc(), F("id").desc()]
    commented = (
        feedback.exclude(comment="")
        .select_related("user")
        .annotate(
            recency=Window(
                RowNumber(),
                partition_by=[F("profile_id"), F("prompt_version_id")],
                order_by=newest_first,
            )
        )
        .filter(recency__lte=comments_per_version)
        .order_by(*newest_first)
    )
    for item in commented:
        version_stats = stats.get((item.profile_id, item.prompt_version_id))
        if version_stats is not None:  # None: feedback given between the two reads
            version_stats.latest_comments.append(item)
    return list(stats.values())


# --- shared conversations ------------------------------------------------------------------


def share_open_get(*, conversation: Conversation) -> ConversationShare | None:
    """The conversation's open (not revoked) share; the caller has checked ownership."""
    return ConversationShare.objects.filter(
        conversation=conversation, revoked_at__isnull=True
    ).first()


def shared_conversation_get(*, token: str) -> Conversation | None:
    """The conversation an open share's token points at; None for a revoked or unknown one."""
    share = (
        ConversationShare.objects.filter(token=token, revoked_at__isnull=True)
        .select_related("conversation")
        .first()
    )
    return share.conversation if share else None


def share_was_revoked(*, token: str) -> bool:
    """Whether ``token`` was a share's link that its owner revoked (so the page can say so)."""
    return ConversationShare.objects.filter(token=token, revoked_at__isnull=False).exists()


def tool_configs_enabled(*, ids: list[int]) -> list[ToolConfig]:
    """The enabled tool rows among ``ids``, in no particular order.

    Plain SQL: every run reads its tools once, and building the ORM's query cost the worker
    more than running it does (docs/performance.md#claim).
    """
    if not ids:
        return []
    with prepared_cursor() as cursor:
        cursor.execute(statements.tool_configs_enabled(len(ids)), ids)
        return [cast(ToolConfig, instance(ToolConfig, row)) for row in cursor.fetchall()]


def tool_secret_values() -> list[str]:
    """Every configured tool secret, and every MCP server's header and environment values
    (the secrets its tools send), so a page shown to others can blank any that slipped into
    a step (tools already redact their own output: agents/tools/base.py)."""
    from agents.crypto import SecretUnreadable
    from agents.models import McpServer

    values: list[str] = []
    for tool in ToolConfig.objects.exclude(secrets_encrypted=""):
        values.extend(tool.get_secrets().values())
    for server in McpServer.objects.exclude(headers_encrypted="", environment_encrypted=""):
        try:
            values.extend(server.secret_values())
        except SecretUnreadable:
            continue  # an administrator must enter them again; nothing sends them meanwhile
    return values


def preference_get(*, user: User) -> UserPreference | None:
    """The user's stored language and theme, if they ever chose one."""
    return UserPreference.objects.filter(user=user).first()


def custom_instructions_of(*, user_id: int) -> str:
    """What the user asked to have added to every prompt of their runs ("" if nothing)."""
    stored = (
        UserPreference.objects.filter(user_id=user_id)
        .values_list("custom_instructions", flat=True)
        .first()
    )
    return stored or ""


class NotificationReach(NamedTuple):
    """Who a new notification of a user reaches: their unread count before it, whether they
    have any webhook at all (which ones apply is read only if so), whether they want e-mail."""

    unread: int
    any_webhook: bool
    wants_email: bool


def notification_reach_get(*, user_id: int) -> NotificationReach:
    """The user's reach, in one read. A plain statement (``statements.notification_reach``):
    a schedule's pause reads it, and so does the run whose failure paused the schedule; any
    other run's comes with ``ended_run_get``."""
    with prepared_cursor() as cursor:
        cursor.execute(statements.notification_reach(), [user_id] * 3)
        return _reach(cursor.fetchone())


def _reach(values: Sequence[Any]) -> NotificationReach:
    unread, any_webhook, wants_email = values
    # SQLite answers EXISTS with 0 or 1.
    return NotificationReach(unread, bool(any_webhook), bool(wants_email))


@dataclass(frozen=True)
class EndedRun:
    """A run as its drive ended, with what the effects of its end need (agents/services/
    execution.py ``_run_ended``): ``run`` has its status, attempts, error and its
    conversation's owner; the flags say which effects could apply at all; ``owner_reach``
    is whom its notification reaches, as the run ended."""

    run: AgentRun
    # The schedule whose firing started it (None: not a scheduled run).
    schedule_id: int | None
    any_budget: bool
    has_children: bool
    replays_a_case: bool
    owner_reach: NotificationReach


def ended_run_get(*, run_id: int) -> EndedRun | None:
    """The run as its drive ended, in one read; None if it is gone.

    A plain statement (``statements.ended_run``): every run's end reads it, and compiling
    its subqueries through the ORM cost more than running them
    (docs/performance.md#after-run). ``run`` holds only the fields the end's effects read,
    and its conversation only its owner; the others load on first access, as ``only`` does.
    """
    with prepared_cursor() as cursor:
        cursor.execute(statements.ended_run(), [run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    fields = statements.ENDED_RUN_FIELDS
    run_values, rest = row[: len(fields)], row[len(fields) :]
    owner_id, schedule_id, any_budget, has_children, replays_a_case, *reach = rest
    run = AgentRun.from_db(DEFAULT_DB_ALIAS, list(fields), list(run_values))
    run.conversation = Conversation.from_db(
        DEFAULT_DB_ALIAS, ["id", "owner_id"], [run.conversation_id, owner_id]
    )
    return EndedRun(
        run=run,
        schedule_id=schedule_id,
        # SQLite answers EXISTS with 0 or 1.
        any_budget=bool(any_budget),
        has_children=bool(has_children),
        replays_a_case=bool(replays_a_case),
        owner_reach=_reach(reach),
    )


def firing_budget_steps(*, run_id: int) -> int | None:
    """The step budget a scheduled run was fired with (None: the profile's)."""
    return (
        ScheduleFiring.objects.filter(run_id=run_id).values_list("budget_steps", flat=True).first()
    )


# -- the python tool's files ---------------------------------------------------------------


def sandbox_file_get(*, user: User | AnonymousUser, file_id: Any) -> SandboxFile | None:
    """A file the python tool kept, if ``user`` owns its conversation; None otherwise."""
    if not user.is_authenticated:
        return None
    return SandboxFile.objects.filter(pk=file_id, conversation__owner_id=user.pk).first()


# --- Schedules, notifications, webhooks (scoped to their owner) -------------------------


def schedules_for_user(*, user: User | AnonymousUser) -> QuerySet[Schedule]:
    if not user.is_authenticated:
        return Schedule.objects.none()
    return Schedule.objects.filter(owner=user).select_related("profile").order_by("title", "pk")


def schedule_get(*, user: User | AnonymousUser, schedule_id: int) -> Schedule | None:
    return schedules_for_user(user=user).filter(pk=schedule_id).first()


def notifications_for_user(*, user: User | AnonymousUser, limit: int = 30) -> list[Notification]:
    if not user.is_authenticated:
        return []
    return list(
        Notification.objects.filter(user=user)
        .select_related("schedule")
        .order_by("-created_at", "-pk")[:limit]
    )


def notification_get(*, user: User | AnonymousUser, notification_id: int) -> Notification | None:
    if not user.is_authenticated:
        return None
    return Notification.objects.filter(user=user, pk=notification_id).first()


def notification_email_wanted(*, user: User | AnonymousUser) -> bool:
    if not user.is_authenticated:
        return False
    return NotificationPreference.objects.filter(user=user, email=True).exists()


def webhooks_for_user(*, user: User | AnonymousUser) -> QuerySet[Webhook]:
    if not user.is_authenticated:
        return Webhook.objects.none()
    return Webhook.objects.filter(owner=user).select_related("schedule")


def webhook_get(*, user: User | AnonymousUser, webhook_id: int) -> Webhook | None:
    return webhooks_for_user(user=user).filter(pk=webhook_id).first()


def webhook_deliveries_for_user(
    *, user: User | AnonymousUser, limit: int = 50
) -> list[WebhookDelivery]:
    if not user.is_authenticated:
        return []
    return list(
        WebhookDelivery.objects.filter(webhook__owner=user)
        .select_related("webhook", "notification")
        .order_by("-created_at", "-pk")[:limit]
    )


def users_of_provider_identity(*, issuer: str, subject: str) -> QuerySet[User]:
    """The user (at most one) who signs in as the identity provider's account ``subject``."""
    return User.objects.filter(provider_identity__issuer=issuer, provider_identity__subject=subject)


# --- API keys (agents/services/api_keys.py) ----------------------------------------------


def api_key_list(*, user: User) -> QuerySet[ApiKey]:
    """The user's keys, revoked ones included, newest first."""
    return ApiKey.objects.filter(owner_id=user.pk).order_by("-created_at", "-pk")


def api_key_get(*, user: User, key_id: int) -> ApiKey | None:
    return ApiKey.objects.filter(owner_id=user.pk, pk=key_id).first()


def api_key_by_hash(*, secret_hash: str) -> ApiKey | None:
    """The key with this hash, revoked or not, with its owner."""
    return ApiKey.objects.filter(secret_hash=secret_hash).select_related("owner").first()


@dataclass(frozen=True)
class EvalProgress:
    """Where an evaluation stands: its cases checked and passed so far, and the results
    asked for (for staff: not scoped to a user, like the run inspector)."""

    eval_run: EvalRun
    results: list[EvalResult]
    checked: int
    passed: int


def eval_run_progress(
    *, eval_run_id: int, result_ids: list[int] | None = None
) -> EvalProgress | None:
    """An evaluation's progress with every result, or only those of ``result_ids``."""
    eval_run = EvalRun.objects.filter(pk=eval_run_id).first()
    if eval_run is None:
        return None
    counts = eval_run.results.aggregate(
        checked=Count("pk", filter=Q(passed__isnull=False)),
        passed=Count("pk", filter=Q(passed=True)),
    )
    results = eval_run.results.order_by("case_id")
    if result_ids is not None:
        results = results.filter(pk__in=result_ids)
    return EvalProgress(
        eval_run=eval_run,
        results=list(results),
        checked=counts["checked"],
        passed=counts["passed"],
    )
