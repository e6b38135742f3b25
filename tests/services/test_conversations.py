"""The write path of a chat turn: send, its refusals, regenerate, edit, cancel."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from agents.models import (
    AgentProfile,
    AgentRun,
    Conversation,
    Message,
    PromptVersion,
    RunEvent,
    ToolConfig,
)
from agents.protocol import RequestRefused
from agents.react.types import FinalAnswerStep
from agents.runs.store import run_finish
from agents.selectors import events_after
from agents.services.conversations import (
    conversation_create,
    message_edit_resend,
    message_send,
    run_cancel,
    run_regenerate,
)
from tests.usage import spend


def _snapshot(conversation: Conversation) -> tuple[int, int, int, int]:
    conversation.refresh_from_db()
    return (
        Message.objects.filter(conversation=conversation).count(),
        AgentRun.objects.filter(conversation=conversation).count(),
        RunEvent.objects.filter(conversation=conversation).count(),
        conversation.last_seq,
    )


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_send_saves_message_queued_run_and_event(conversation, user, default_profile):
    result = message_send(
        conversation=conversation, user=user, content="What is 6 times 7?", client_id="c-1"
    )

    assert result.created
    assert result.message.role == Message.Role.USER
    assert result.message.client_id == "c-1"
    run = result.run
    assert run.status == AgentRun.Status.QUEUED
    assert run.trigger_message == result.message
    assert run.profile_version.profile == default_profile
    assert run.profile_version.snapshot["slug"] == default_profile.slug
    assert run.model_name
    [event] = events_after(conversation=conversation, after_seq=0)
    assert (event.seq, event.type, event.run_id) == (1, "message.created", run.pk)
    assert event.payload["message"]["content"] == "What is 6 times 7?"
    assert event.payload["message"]["client_id"] == "c-1"
    conversation.refresh_from_db()
    assert conversation.title == "What is 6 times 7?"
    assert conversation.last_seq == 1


def test_repeated_client_id_returns_the_same_message_and_does_nothing_else(conversation, user):
    first = message_send(conversation=conversation, user=user, content="hi", client_id="same")
    before = _snapshot(conversation)

    again = message_send(conversation=conversation, user=user, content="hi", client_id="same")

    assert not again.created
    assert again.message == first.message
    assert again.run == first.run
    assert _snapshot(conversation) == before


def test_title_is_cut_at_a_word_and_kept_afterwards(conversation, user):
    long_first = "word " * 40
    message_send(conversation=conversation, user=user, content=long_first)
    conversation.refresh_from_db()
    assert conversation.title.endswith("…")
    assert len(conversation.title) <= 60


@pytest.mark.parametrize(
    ("content", "code"), [("", "empty"), ("   \n ", "empty"), ("x" * 101, "too_long")]
)
def test_bad_content_is_refused_and_writes_nothing(conversation, user, settings, content, code):
    settings.CHAT_MAX_MESSAGE_CHARS = 100
    before = _snapshot(conversation)

    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=conversation, user=user, content=content, client_id="c")

    assert refused.value.code == code
    assert refused.value.message
    assert _snapshot(conversation) == before
    # The same client_id still works once the content is fixed: nothing was half-saved.
    assert message_send(conversation=conversation, user=user, content="ok", client_id="c").created


def test_second_send_while_a_run_is_active_is_refused(conversation, user):
    message_send(conversation=conversation, user=user, content="first")
    before = _snapshot(conversation)

    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=conversation, user=user, content="second")

    assert refused.value.code == "run_in_progress"
    assert _snapshot(conversation) == before


def _finish(run: AgentRun, text: str = "done") -> None:
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.RUNNING)
    run.refresh_from_db()
    run_finish(run=run, step=FinalAnswerStep(text=text))


def test_rate_limit_per_minute(user, default_profile, settings, minute_turn_clock):
    """Started 0.5 s before a minute turns: the third send falls in the next clock minute and
    is still one too many in the last minute."""
    settings.CHAT_SENDS_PER_MINUTE = 2
    conversations = [conversation_create(owner=user) for _ in range(3)]
    message_send(conversation=conversations[0], user=user, content="one")
    minute_turn_clock.advance(0.3)
    message_send(conversation=conversations[1], user=user, content="two")
    minute_turn_clock.advance(0.3)
    before = _snapshot(conversations[2])

    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=conversations[2], user=user, content="three")

    assert refused.value.code == "rate_limited"
    assert _snapshot(conversations[2]) == before


def test_rate_limit_window_slides(user, default_profile, settings, minute_turn_clock):
    """40 sends in 3 s across a minute turn let 20 through, and the window frees a slot only
    a minute after each counted send."""
    settings.CHAT_SENDS_PER_MINUTE = 20
    conversations = [conversation_create(owner=user) for _ in range(41)]
    outcomes = []
    for conversation in conversations[:40]:
        try:
            message_send(conversation=conversation, user=user, content="hi")
            outcomes.append("sent")
        except RequestRefused as refusal:
            outcomes.append(refusal.code)
        minute_turn_clock.advance(3 / 40)
    assert outcomes == ["sent"] * 20 + ["rate_limited"] * 20

    minute_turn_clock.advance(60 - 3 - 0.1)  # the first send is 59.9 s old: still counted
    with pytest.raises(RequestRefused):
        message_send(conversation=conversations[40], user=user, content="hi")
    minute_turn_clock.advance(0.2)  # now it has left the window
    assert message_send(conversation=conversations[40], user=user, content="hi").created


def test_daily_token_quota(conversation, user, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 1000
    sent = message_send(conversation=conversation, user=user, content="hello")
    spend(sent.run, prompt_tokens=900, completion_tokens=100)
    _finish(sent.run)

    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=conversation, user=user, content="again")

    assert refused.value.code == "quota_exceeded"


def test_someone_elses_conversation_looks_missing(conversation, other_user):
    before = _snapshot(conversation)
    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=conversation, user=other_user, content="hi")
    assert refused.value.code == "not_found"
    assert _snapshot(conversation) == before


def test_profile_restricted_to_a_group(conversation, user, default_profile):
    staff_only = AgentProfile.objects.create(name="Staff", slug="staff")
    staff_only.allowed_groups.add(Group.objects.create(name="staff"))

    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=conversation, user=user, content="hi", profile=staff_only)
    assert refused.value.code == "profile_not_allowed"

    user.groups.add(Group.objects.get(name="staff"))
    result = message_send(conversation=conversation, user=user, content="hi", profile=staff_only)
    assert result.run.profile_version.profile == staff_only


@pytest.fixture(params=["the default profile", "the conversation's own"])
def profile_read_with_the_lock(request, user, default_profile):
    """A profile a send reads with its lock (the default one, or the conversation's own), and
    a conversation of the user's that runs on it."""
    if request.param == "the default profile":
        return default_profile, conversation_create(owner=user)
    profile = AgentProfile.objects.create(name="Own", slug="own")
    return profile, conversation_create(owner=user, profile=profile)


def test_a_restricted_profile_read_with_the_lock_is_refused_to_others(
    user, profile_read_with_the_lock
):
    """The profile read in the locking statement is checked there, against the same groups."""
    restricted, conversation = profile_read_with_the_lock
    group = Group.objects.create(name="staff")
    restricted.allowed_groups.add(group)

    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=conversation, user=user, content="hi", client_id="a")
    assert refused.value.code == "profile_not_allowed"
    assert not conversation.messages.exists()

    user.groups.add(group)
    sent = message_send(conversation=conversation, user=user, content="hi", client_id="b")
    assert sent.run.profile_version.profile == restricted


def test_run_is_pinned_to_the_profile_version_at_send_time(conversation, user, default_profile):
    first = message_send(conversation=conversation, user=user, content="one")
    _finish(first.run)
    default_profile.max_iterations = 3
    default_profile.save()

    second = message_send(conversation=conversation, user=user, content="two")

    assert first.run.profile_version.snapshot["max_iterations"] != 3
    assert second.run.profile_version.snapshot["max_iterations"] == 3
    assert second.run.profile_version.number == first.run.profile_version.number + 1


def test_regenerate_queues_a_new_run_for_the_last_user_message(conversation, user):
    sent = message_send(conversation=conversation, user=user, content="tell me a joke")
    _finish(sent.run, "an old joke")

    run = run_regenerate(conversation=conversation, user=user)

    assert run.pk != sent.run.pk
    assert run.status == AgentRun.Status.QUEUED
    assert run.trigger_message == sent.message


def test_regenerate_refused_while_running_or_with_nothing_to_answer(conversation, user):
    with pytest.raises(RequestRefused) as nothing:
        run_regenerate(conversation=conversation, user=user)
    assert nothing.value.code == "nothing_to_regenerate"

    message_send(conversation=conversation, user=user, content="hi")
    with pytest.raises(RequestRefused) as busy:
        run_regenerate(conversation=conversation, user=user)
    assert busy.value.code == "run_in_progress"


def test_edit_resend_sends_a_new_message_naming_the_original(conversation, user):
    sent = message_send(conversation=conversation, user=user, content="wrong question")
    _finish(sent.run)

    edited = message_edit_resend(message=sent.message, user=user, content="right question")

    assert edited.created
    assert edited.message.pk != sent.message.pk
    assert edited.message.content == "right question"
    assert edited.run.trigger_message == edited.message
    created = edited.run.events.get(type="message.created")
    assert created.payload["message"]["edited_from"] == sent.message.pk
    sent.message.refresh_from_db()
    assert sent.message.content == "wrong question"


def test_only_own_user_messages_can_be_edited(conversation, user, other_user):
    sent = message_send(conversation=conversation, user=user, content="q")
    _finish(sent.run, "an answer")
    answer = Message.objects.get(role=Message.Role.ASSISTANT)

    with pytest.raises(RequestRefused) as not_editable:
        message_edit_resend(message=answer, user=user, content="changed")
    assert not_editable.value.code == "not_editable"
    with pytest.raises(RequestRefused) as foreign:
        message_edit_resend(message=sent.message, user=other_user, content="changed")
    assert foreign.value.code == "not_found"


def test_cancel_a_queued_run_ends_it_at_once(conversation, user):
    sent = message_send(conversation=conversation, user=user, content="hi")

    run = run_cancel(run=sent.run, user=user)

    assert run.status == AgentRun.Status.CANCELLED
    assert run.finished_at is not None
    last = events_after(conversation=conversation, after_seq=0).last()
    assert (last.type, last.run_id, last.seq) == ("run.cancelled", run.pk, 2)
    # A new message can be sent now.
    assert message_send(conversation=conversation, user=user, content="again").created


def test_cancel_a_running_run_asks_the_worker(conversation, user):
    sent = message_send(conversation=conversation, user=user, content="hi")
    AgentRun.objects.filter(pk=sent.run.pk).update(status=AgentRun.Status.RUNNING)

    run = run_cancel(run=sent.run, user=user)

    assert run.status == AgentRun.Status.RUNNING
    assert run.cancel_requested_at is not None
    assert events_after(conversation=conversation, after_seq=1).count() == 0


def test_cancel_is_refused_for_others_and_a_no_op_when_finished(conversation, user, other_user):
    sent = message_send(conversation=conversation, user=user, content="hi")
    with pytest.raises(RequestRefused) as foreign:
        run_cancel(run=sent.run, user=other_user)
    assert foreign.value.code == "not_found"

    _finish(sent.run)
    before = _snapshot(conversation)
    assert run_cancel(run=sent.run, user=user).status == AgentRun.Status.SUCCEEDED
    assert _snapshot(conversation) == before


# --- the send's row lock (plain SQL, docs/performance.md#send) ------------------------------


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_the_lock_reads_the_conversations_profile_and_endpoint_as_the_orm_would(
    user, default_profile, django_assert_num_queries
):
    from decimal import Decimal

    from agents.models import ModelConfig
    from agents.services.conversations import _lock_owned

    endpoint = ModelConfig.objects.create(
        name="priced",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        prompt_price_per_million=Decimal("1.2500"),
        supports_tool_calling=True,
    )
    profile = AgentProfile.objects.create(
        name="Budgeted",
        slug="budgeted",
        model_config=endpoint,
        budget_tool_calls={"http_request": 2},
    )
    conversation = conversation_create(owner=user, profile=profile)

    with django_assert_num_queries(1):
        lock = _lock_owned(conversation=conversation, user=user)
        locked = lock.conversation
        # Read with the lock: no query of their own.
        assert locked.profile == profile
        assert locked.profile.model_config == endpoint
    expected = Conversation.objects.select_related("profile__model_config").get(pk=conversation.pk)
    for name in ("id", "owner_id", "title", "archived", "last_seq", "created_at", "updated_at"):
        assert getattr(locked, name) == getattr(expected, name)
    assert locked.profile.budget_tool_calls == {"http_request": 2}
    assert locked.profile.model_config.prompt_price_per_million == Decimal("1.2500")
    assert locked.profile.model_config.supports_tool_calling is True
    assert lock.default_profile is None


def test_the_lock_brings_the_default_profile_when_the_conversation_has_none(
    conversation, user, default_profile, django_assert_num_queries
):
    from agents.services.conversations import _lock_owned

    with django_assert_num_queries(1):
        lock = _lock_owned(conversation=conversation, user=user)
        assert lock.conversation.profile is None
        assert lock.default_profile == default_profile
        endpoint = lock.default_profile.model_config
    assert endpoint == default_profile.model_config


def test_the_lock_refuses_another_users_conversation(conversation, other_user):
    from agents.services.conversations import ConversationGone, _lock_owned

    with pytest.raises(ConversationGone):
        _lock_owned(conversation=conversation, user=other_user)


def test_a_profile_limited_to_groups_is_refused_to_others_and_allowed_to_members(
    conversation, user
):
    group = Group.objects.create(name="testers")
    limited = AgentProfile.objects.create(name="Limited", slug="limited")
    limited.allowed_groups.add(group)

    with pytest.raises(RequestRefused):
        message_send(
            conversation=conversation, user=user, content="hi", client_id="a", profile=limited
        )
    user.groups.add(group)
    sent = message_send(
        conversation=conversation, user=user, content="hi", client_id="b", profile=limited
    )
    assert sent.run.profile_version.profile == limited


def test_the_prompt_version_read_with_the_lock_is_reused_until_the_profile_changes(
    conversation, user, default_profile
):
    def send(client_id: str) -> AgentRun:
        run = message_send(
            conversation=conversation, user=user, content="hi", client_id=client_id
        ).run
        AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.SUCCEEDED)
        return run

    first = send("a").profile_version
    assert send("b").profile_version == first
    default_profile.system_prompt = "Answer in one word."
    default_profile.save()
    changed = send("c").profile_version
    assert changed.number == first.number + 1
    assert changed.snapshot != first.snapshot
    assert send("d").profile_version == changed


def _tool(name: str) -> ToolConfig:
    return ToolConfig.objects.create(name=name, kind="calculator", description=name)


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_the_lock_reads_the_profiles_tools_as_the_snapshot_does(
    conversation, user, default_profile, django_assert_num_queries
):
    from agents.services.conversations import _lock_owned

    # Created out of name order, and names whose order depends on case.
    default_profile.tools.add(_tool("zeta"), _tool("Beta"), _tool("alpha_2"), _tool("alpha"))
    other = AgentProfile.objects.create(name="Other", slug="other")

    with django_assert_num_queries(1):
        lock = _lock_owned(conversation=conversation, user=user)

    expected = list(default_profile.tools.order_by("name").values_list("id", "name"))
    assert lock.tools_of(default_profile) == expected
    assert lock.tools_of(other) is None  # not the profile read with the lock


def test_the_lock_reads_no_tools_for_a_profile_without_any(user):
    from agents.services.conversations import _lock_owned

    profile = AgentProfile.objects.create(name="Bare", slug="bare")
    conversation = conversation_create(owner=user, profile=profile)

    assert _lock_owned(conversation=conversation, user=user).tools_of(profile) == []


def test_an_edit_of_the_profiles_tools_writes_a_new_version_at_the_next_send(
    user, profile_read_with_the_lock
):
    """What the admin does to a profile's tools (add, rename, remove) pins the next run to a
    new version; a send after no change reuses the last one."""
    profile, conversation = profile_read_with_the_lock
    sent = iter(range(100))

    def send() -> PromptVersion:
        run = message_send(
            conversation=conversation, user=user, content="hi", client_id=f"c{next(sent)}"
        ).run
        AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.SUCCEEDED)
        return run.profile_version

    def tools(version: PromptVersion) -> list[tuple[int, str]]:
        snapshot = version.snapshot
        return list(zip(snapshot["tool_ids"], snapshot["tool_names"], strict=True))

    first = send()
    before = tools(first)
    zeta, alpha = _tool("zeta"), _tool("alpha")
    profile.tools.add(zeta, alpha)
    added = send()
    assert added.number == first.number + 1
    assert tools(added) == sorted([*before, (alpha.pk, "alpha"), (zeta.pk, "zeta")], key=name)
    assert send() == added

    alpha.name = "zulu"
    alpha.save()
    renamed = send()
    assert renamed.number == added.number + 1
    assert tools(renamed) == sorted([*before, (zeta.pk, "zeta"), (alpha.pk, "zulu")], key=name)
    assert send() == renamed

    profile.tools.remove(zeta)
    removed = send()
    assert removed.number == renamed.number + 1
    assert tools(removed) == sorted([*before, (alpha.pk, "zulu")], key=name)
    assert send() == removed


def name(tool: tuple[int, str]) -> str:
    return tool[1]


def test_a_send_with_another_profile_pins_that_profiles_tools(conversation, user, default_profile):
    other = AgentProfile.objects.create(name="Other", slug="other")
    other.tools.add(_tool("only_mine"))

    run = message_send(conversation=conversation, user=user, content="hi", profile=other).run

    assert run.profile_version.profile == other
    assert run.profile_version.snapshot["tool_names"] == ["only_mine"]
