"""Reads, scoped to the user asking: a foreign id looks exactly like a missing one.

The run inspector's reads at the end serve the admin, where staff read every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Case, Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Concat, Greatest, StrIndex, Substr, Upper
from django.db.models.lookups import GreaterThan

from agents.models import (
    AgentProfile,
    AgentRun,
    AnswerFeedback,
    Conversation,
    ConversationShare,
    Message,
    ModelCall,
    RunEvent,
    ToolApproval,
    ToolConfig,
)

# The same statuses as agents.services.runs.ACTIVE_STATUSES; reads do not import services.
_ACTIVE_RUN_STATUSES = (AgentRun.Status.QUEUED, AgentRun.Status.RUNNING)


def conversation_list(
    *, user: User | AnonymousUser, q: str = "", archived: bool = False
) -> QuerySet[Conversation]:
    """The user's conversations: pinned first (latest pin on top), then most recently active.

    Each row carries ``has_active_run``; with ``q`` (searched in title and text) each also
    carries ``match_excerpt``, a window of its newest matching message around the match
    (None when only the title matched). Both are subqueries, so a page costs one query.
    """
    conversations = Conversation.objects.filter(owner_id=user.pk, archived=archived).annotate(
        has_active_run=Exists(
            AgentRun.objects.filter(
                conversation=OuterRef("pk"),
                status__in=_ACTIVE_RUN_STATUSES,
            )
        )
    )
    q = q.strip()
    if q:
        matching_messages = Message.objects.filter(content__icontains=q)
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
        conversation=conversation, status__in=_ACTIVE_RUN_STATUSES
    ).exists()


def conversation_get(*, user: User | AnonymousUser, conversation_id: int) -> Conversation | None:
    return (
        Conversation.objects.filter(pk=conversation_id, owner_id=user.pk)
        .select_related("profile")
        .first()
    )


def events_after(
    *, conversation: Conversation, after_seq: int, limit: int | None = None
) -> QuerySet[RunEvent]:
    """Stored events with ``seq > after_seq``, oldest first: what a reconnecting client missed."""
    events = RunEvent.objects.filter(conversation=conversation, seq__gt=after_seq).order_by("seq")
    return events[:limit] if limit is not None else events


def message_list(*, conversation: Conversation) -> QuerySet[Message]:
    return Message.objects.filter(conversation=conversation).order_by("id")


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
    messages = Message.objects.filter(conversation__owner_id=user.pk)
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
    # Newest comments first; enough rows to fill every version's list in the usual case.
    commented = (
        feedback.exclude(comment="")
        .select_related("user")
        .order_by("-updated_at", "-id")[: comments_per_version * max(len(stats), 1) * 4]
    )
    for item in commented:
        version_stats = stats.get((item.profile_id, item.prompt_version_id))
        if version_stats is not None and len(version_stats.latest_comments) < comments_per_version:
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


def tool_secret_values() -> list[str]:
    """Every configured tool secret, so a page shown to others can blank any that slipped
    into a step (tools already redact their own output: agents/tools/base.py)."""
    values: list[str] = []
    for tool in ToolConfig.objects.exclude(secrets_encrypted=""):
        values.extend(tool.get_secrets().values())
    return values
