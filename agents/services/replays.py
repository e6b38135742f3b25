"""Replays: a stored run run again with another prompt version and/or model endpoint.

A replay is an ordinary run (``AgentRun``, queued, claimed and driven by a worker like any
other: ``agents/services/execution.py``) with two differences:

- It runs in a copy of the original's branch (the messages from the first down to the
  question, ``Conversation.for_replay``), owned by the staff member who started it. So
  nothing of it reaches the user's conversation, tree, sidebar, exports, shares or quota;
  the sidebar and searches of the staff member leave such copies out too. Its tokens are
  the staff member's: the ledger says who caused each spend, the user did not ask for this
  one, and a replay is refused like a send when its starter's quota is used up.
- Its tool calls go through ``RecordedCalls`` (``agents/react/replay.py``): a call the
  original recorded gets the recorded observation, so no side effect happens twice; any
  other is run only if the tool only reads and the replay's setting allows it, and a tool
  that needs approval is never run (nobody is asked: the replay never waits for a person).

Unrecorded tool calls run as the staff member (tools are scoped to the conversation's
owner), so a replay reads none of the user's data that the original did not record.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext

from agents.llm.factory import model_name_for
from agents.models import AgentRun, Conversation, Message, ModelConfig, PromptVersion, UsageEntry
from agents.profile_snapshot import ProfileSnapshot, snapshot_model_config
from agents.react.replay import RecordedCalls, recorded_calls
from agents.runs.queue import run_enqueue_on_commit
from agents.runs.reads import run_prior_steps
from agents.selectors import branch_ids
from agents.services.usage import (
    QuotaExceeded,
    usage_check_quota,
    usage_refusal,
    usage_reserve,
)


class ReplayRefused(Exception):
    """The run cannot be replayed; the message says why, to staff."""


@transaction.atomic
def run_replay_start(
    *,
    run: AgentRun,
    user: User,
    version: PromptVersion,
    model_config: ModelConfig | None = None,
    unrecorded: str = AgentRun.Unrecorded.ANSWER,
) -> AgentRun:
    """Queue a replay of ``run`` with ``version`` (any version of any profile) and
    ``model_config`` (None: the version's own endpoint), started by ``user``.

    Raises ``ReplayRefused`` (and writes nothing) for a run that is not finished, is itself
    a replay, or when ``user`` has no quota left today or a monthly budget is used up.
    """
    if not run.is_terminal:
        raise ReplayRefused(gettext("Only a run that has ended can be replayed."))
    if run.is_replay:
        raise ReplayRefused(gettext("A replay cannot be replayed; replay its original."))
    if unrecorded not in AgentRun.Unrecorded.values:
        raise ReplayRefused(gettext("Choose what the replay does with unrecorded calls."))
    try:
        # Counted like a send of the staff member's: their daily quota and monthly budgets.
        usage_check_quota(user_id=user.pk)
    except QuotaExceeded as exceeded:
        raise ReplayRefused(str(usage_refusal(exceeded))) from None
    ids = branch_ids(conversation=run.conversation, leaf_id=run.trigger_message_id)
    originals = Message.objects.in_bulk(ids)
    messages = [(originals[message_id].role, originals[message_id].content) for message_id in ids]
    return replay_start(
        messages=messages,
        user=user,
        version=version,
        model_config=model_config,
        unrecorded=unrecorded,
        replay_of=run,
        title=gettext("Replay of run %(number)s") % {"number": run.pk},
    )


def replay_start(
    *,
    messages: list[tuple[str, str]],
    user: User,
    version: PromptVersion,
    model_config: ModelConfig | None = None,
    unrecorded: str = AgentRun.Unrecorded.ANSWER,
    replay_of: AgentRun | None,
    title: str,
) -> AgentRun:
    """Queue a replay answering the last of ``messages`` (``(role, content)``, oldest first)
    with ``version``, in a copy of its own owned by ``user``, its tool calls answered from
    ``replay_of``'s record (none: every call is unrecorded). Callers check the quota first;
    the caller's transaction holds the writes."""
    snapshot = ProfileSnapshot.from_version(version)
    if model_config is None:
        model_config = snapshot_model_config(snapshot)
    copy = Conversation.objects.create(
        owner=user, title=title, profile_id=version.profile_id, for_replay=True
    )
    question = _copy_messages(messages, into=copy)
    replay = AgentRun.objects.create(
        conversation=copy,
        trigger_message=question,
        profile_version=version,
        model_config=model_config,
        model_name=model_name_for(model_config),
        mode=snapshot.mode,
        replay_of=replay_of,
        replay_unrecorded=unrecorded,
    )
    try:
        usage_reserve(user_id=user.pk, kind=UsageEntry.Kind.RUN, run=replay)
    except QuotaExceeded as exceeded:
        raise ReplayRefused(str(usage_refusal(exceeded))) from None
    run_enqueue_on_commit(run_id=replay.pk)
    return replay


def _copy_messages(messages: list[tuple[str, str]], *, into: Conversation) -> Message:
    """Write ``messages`` into ``into``, each following the one before; returns the last
    (the question), which becomes ``into``'s active leaf."""
    parent: Message | None = None
    for role, content in messages:
        parent = Message.objects.create(
            conversation=into, parent=parent, role=role, content=content
        )
    if parent is None:
        raise ReplayRefused(gettext("The run's question is gone."))
    into.active_leaf = parent
    into.save(update_fields=["active_leaf"])
    return parent


def replay_tool_policy(*, run: AgentRun) -> RecordedCalls | None:
    """The tool policy of a replay (the calls its original recorded), None for any other
    run. Read when the replay's worker sets it up."""
    if not run.is_replay:
        return None
    # An original deleted since leaves nothing recorded: every call is then unrecorded.
    original = AgentRun.objects.filter(pk=run.replay_of_id).first() if run.replay_of_id else None
    recorded = recorded_calls(run_prior_steps(run=original)) if original is not None else []
    return RecordedCalls(
        recorded,
        run_unrecorded_read_only=run.replay_unrecorded == AgentRun.Unrecorded.RUN_READ_ONLY,
    )
