"""Client frames: sends, cancels and pings work; every bad frame gets an `error` frame and the
socket stays open, with nothing written."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from agents.models import AgentRun, Message
from agents.services.conversations import conversation_create, message_send
from tests.consumers.sockets import (
    QUIET_SECONDS,
    client_id,
    receive,
    run,
    send,
    session_cookie,
    socket,
)
from tests.usage import spend

pytestmark = pytest.mark.django_db(transaction=True)


async def assert_still_open(communicator) -> None:
    await send(communicator, {"type": "ping"})
    assert await receive(communicator) == {"type": "pong"}


def exchange(cookie: str, conversation_id: int, frames: list) -> list[dict]:
    """Send each raw frame (str, bytes or dict) and collect the one reply to each."""

    async def body():
        communicator = socket(conversation_id, cookie=cookie)
        assert (await communicator.connect())[0]
        replies = []
        for frame in frames:
            if isinstance(frame, bytes):
                await communicator.send_to(bytes_data=frame)
            elif isinstance(frame, str):
                # Straight to the application: send_to() will not send an empty text frame.
                await communicator.send_input({"type": "websocket.receive", "text": frame})
            else:
                await send(communicator, frame)
            replies.append(await receive(communicator))
            await assert_still_open(communicator)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return replies

    return run(body)


# ---- sending -------------------------------------------------------------------------------


def test_message_send_stores_the_message_queues_a_run_and_echoes_message_created(
    user, conversation
):
    cookie = session_cookie(user)
    sent_id = client_id()

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        await send(
            communicator, {"type": "message.send", "content": "What is 2+2?", "client_id": sent_id}
        )
        created = await receive(communicator)
        # The same client_id again (a resend after a dropped socket) changes nothing.
        await send(
            communicator, {"type": "message.send", "content": "What is 2+2?", "client_id": sent_id}
        )
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return created

    created = run(body)
    assert created["type"] == "message.created"
    assert created["seq"] == 1
    assert created["message"]["content"] == "What is 2+2?"
    assert created["message"]["client_id"] == sent_id
    message = Message.objects.get(conversation=conversation)
    assert message.client_id == sent_id
    queued = AgentRun.objects.get(conversation=conversation)
    assert queued.status == AgentRun.Status.QUEUED
    assert queued.trigger_message == message
    assert created["run_id"] == queued.pk


def test_message_send_with_a_profile_slug(user, conversation):
    from agents.models import AgentProfile

    profile = AgentProfile.objects.get(is_default=True)
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        frame = {"type": "message.send", "content": "hi", "client_id": "c-1"}
        await send(communicator, {**frame, "profile": profile.slug})
        created = await receive(communicator)
        await communicator.disconnect()
        return created

    assert run(body)["type"] == "message.created"
    assert AgentRun.objects.get(conversation=conversation).profile_version.profile == profile


def test_message_send_continues_the_branch_the_client_names(user, conversation):
    """The page sends the end of the branch it shows as ``parent_id`` (docs/protocol.md)."""
    from agents.react.types import FinalAnswerStep
    from agents.runs.store import run_finish

    first = message_send(conversation=conversation, user=user, content="q1")
    AgentRun.objects.filter(pk=first.run.pk).update(status=AgentRun.Status.RUNNING)
    first.run.refresh_from_db()
    answer = run_finish(run=first.run, step=FinalAnswerStep(text="a1"))
    assert answer is not None
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=conversation.last_seq + 3)
        assert (await communicator.connect())[0]
        frame = {"type": "message.send", "content": "q1, again", "client_id": "c-2"}
        await send(communicator, {**frame, "parent_id": first.message.pk})
        created = await receive(communicator)
        await communicator.disconnect()
        return created

    created = run(body)
    assert created["type"] == "message.created"
    assert created["message"]["parent_id"] == first.message.pk
    conversation.refresh_from_db()
    assert conversation.active_leaf_id == created["message"]["id"]
    assert not Message.objects.get(pk=answer.pk).on_active_branch


# ---- bad frames ----------------------------------------------------------------------------

MAX_CHARS = 16000
SEND = {"type": "message.send", "client_id": "a"}


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("{not json", "invalid_json"),
        ("", "invalid_json"),
        ("[1, 2]", "invalid_frame"),
        ('"message.send"', "invalid_frame"),
        ("42", "invalid_frame"),
        (b'{"type": "ping"}', "invalid_frame"),
        ({"content": "no type"}, "invalid_field"),
        ({"type": 7}, "invalid_field"),
        ({"type": "message.delete"}, "unknown_type"),
        ({"type": "message.send", "client_id": "a"}, "invalid_field"),
        ({"type": "message.send", "content": 5, "client_id": "a"}, "invalid_field"),
        ({"type": "message.send", "content": "hi"}, "invalid_field"),
        ({"type": "message.send", "content": "hi", "client_id": ""}, "invalid_field"),
        ({"type": "message.send", "content": "hi", "client_id": "x" * 65}, "invalid_field"),
        ({"type": "message.send", "content": "hi", "client_id": 3}, "invalid_field"),
        (
            {"type": "message.send", "content": "hi", "client_id": "a", "profile": 1},
            "invalid_field",
        ),
        ({**SEND, "content": ""}, "empty"),
        ({**SEND, "content": " \n\t "}, "empty"),
        ({**SEND, "content": "x" * (MAX_CHARS + 1)}, "too_long"),
        ({**SEND, "content": "hi", "profile": "no-such"}, "profile_not_allowed"),
        ({**SEND, "content": "hi", "parent_id": "7"}, "invalid_field"),
        ({**SEND, "content": "hi", "parent_id": -1}, "invalid_field"),
        ({**SEND, "content": "hi", "parent_id": True}, "invalid_field"),
        ({**SEND, "content": "hi", "parent_id": 999_999_999}, "not_found"),
        ({"type": "run.cancel"}, "invalid_field"),
        ({"type": "run.cancel", "run_id": "12"}, "invalid_field"),
        ({"type": "run.cancel", "run_id": True}, "invalid_field"),
        ({"type": "run.cancel", "run_id": -1}, "invalid_field"),
        ({"type": "run.cancel", "run_id": 10**9}, "not_found"),
        ({"type": "resume"}, "invalid_field"),
        ({"type": "resume", "after_seq": 1.5}, "invalid_field"),
    ],
)
def test_bad_frame_gets_an_error_and_the_socket_stays_open(
    user, conversation, settings, frame, code
):
    settings.CHAT_MAX_MESSAGE_CHARS = MAX_CHARS
    (reply,) = exchange(session_cookie(user), conversation.pk, [frame])
    assert reply["type"] == "error"
    assert reply["code"] == code
    assert reply["message"]
    assert not Message.objects.exists()
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize(
    "frame",
    [
        "[" * 50_000,
        '{"type": "ping", "nested": ' + "[" * 30_000 + "]" * 30_000 + "}",
    ],
    ids=["unclosed", "closed"],
)
def test_deeply_nested_json_is_an_error_frame_and_the_socket_stays_usable(
    user, conversation, frame
):
    send_frame = {"type": "message.send", "content": "still here", "client_id": "after"}
    nested, created = exchange(session_cookie(user), conversation.pk, [frame, send_frame])
    assert nested["type"] == "error"
    assert nested["code"] == "invalid_json"
    assert "deep" in nested["message"]
    assert created["type"] == "message.created"


def test_errors_for_a_send_name_its_client_id(user, conversation):
    frame = {"type": "message.send", "content": "  ", "client_id": "pending-7"}
    (reply,) = exchange(session_cookie(user), conversation.pk, [frame])
    assert reply == {
        "type": "error",
        "code": "empty",
        "message": "The message is empty.",
        "client_id": "pending-7",
    }


def test_a_frame_over_the_byte_limit_is_refused_before_parsing(user, conversation, settings):
    limit = settings.CHAT_MAX_FRAME_BYTES
    # Within the character limit for content, over the byte limit for the frame: 3 bytes each.
    settings.CHAT_MAX_MESSAGE_CHARS = limit
    content = "€" * (limit // 3 + 1)
    frames = [{"type": "message.send", "content": content, "client_id": "big"}]
    (reply,) = exchange(session_cookie(user), conversation.pk, frames)
    assert reply["code"] == "frame_too_large"
    assert str(limit) in reply["message"]
    assert not Message.objects.exists()


def test_many_bad_frames_in_a_row_then_a_good_send(user, conversation):
    cookie = session_cookie(user)
    bad = ["{", "[]", {"type": "nope"}, {"type": "message.send", "content": "", "client_id": "a"}]
    replies = exchange(cookie, conversation.pk, bad)
    assert [reply["code"] for reply in replies] == [
        "invalid_json",
        "invalid_frame",
        "unknown_type",
        "empty",
    ]
    (created,) = exchange(
        cookie, conversation.pk, [{"type": "message.send", "content": "ok", "client_id": "b"}]
    )
    assert created["type"] == "message.created"


# ---- limits from the service ---------------------------------------------------------------


def test_rate_limit_refusal_is_an_error_frame(user, settings, minute_turn_clock):
    # Started 0.5 s before a minute turns; the second send lands after the turn.
    settings.CHAT_SENDS_PER_MINUTE = 1
    first = conversation_create(owner=user)
    second = conversation_create(owner=user)
    cookie = session_cookie(user)
    (created,) = exchange(
        cookie, first.pk, [{"type": "message.send", "content": "one", "client_id": "1"}]
    )
    minute_turn_clock.advance(0.6)
    (refused,) = exchange(
        cookie, second.pk, [{"type": "message.send", "content": "two", "client_id": "2"}]
    )
    assert created["type"] == "message.created"
    assert refused["type"] == "error"
    assert refused["code"] == "rate_limited"
    assert refused["client_id"] == "2"
    # When the window lets the next send through, in whole seconds, for the page's countdown.
    assert isinstance(refused["retry_after"], int)
    assert 1 <= refused["retry_after"] <= 60
    assert not second.messages.exists()


def test_daily_quota_refusal_is_an_error_frame(user, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 100
    spent = conversation_create(owner=user)
    result = message_send(conversation=spent, user=user, content="earlier", client_id="e")
    spend(result.run, prompt_tokens=80, completion_tokens=30)
    AgentRun.objects.filter(pk=result.run.pk).update(status=AgentRun.Status.SUCCEEDED)
    fresh = conversation_create(owner=user)
    (refused,) = exchange(
        session_cookie(user),
        fresh.pk,
        [{"type": "message.send", "content": "more", "client_id": "m"}],
    )
    assert refused["code"] == "quota_exceeded"
    assert not fresh.messages.exists()


def test_a_second_send_while_a_run_is_queued_is_refused(user, conversation):
    frames = [
        {"type": "message.send", "content": "one", "client_id": "1"},
        {"type": "message.send", "content": "two", "client_id": "2"},
    ]
    created, refused = exchange(session_cookie(user), conversation.pk, frames)
    assert created["type"] == "message.created"
    assert refused["code"] == "run_in_progress"
    assert list(conversation.messages.values_list("content", flat=True)) == ["one"]


def test_a_send_to_a_conversation_deleted_in_another_tab_closes_the_socket(user, conversation):
    """The send's own row lock finds it gone: the same frame and close as any other frame."""
    from agents.models import Conversation
    from agents.protocol import CLOSE_NOT_FOUND

    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        await database_sync_to_async(Conversation.objects.filter(pk=conversation.pk).delete)()
        await send(communicator, {"type": "message.send", "content": "hi", "client_id": "c"})
        gone = await receive(communicator)
        closed = await communicator.receive_output(timeout=10)
        return gone, closed

    gone, closed = run(body)
    assert gone["type"] == "error"
    assert gone["code"] == "not_found"
    assert closed == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}
    assert not Message.objects.filter(content="hi").exists()


# ---- cancelling ----------------------------------------------------------------------------


def test_run_cancel_ends_a_queued_run_and_streams_run_cancelled(user, conversation):
    result = message_send(conversation=conversation, user=user, content="go", client_id="g")
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=1)
        assert (await communicator.connect())[0]
        await send(communicator, {"type": "run.cancel", "run_id": result.run.pk})
        cancelled = await receive(communicator)
        await communicator.disconnect()
        return cancelled

    cancelled = run(body)
    assert cancelled["type"] == "run.cancelled"
    assert cancelled["run_id"] == result.run.pk
    assert cancelled["seq"] == 2
    result.run.refresh_from_db()
    assert result.run.status == AgentRun.Status.CANCELLED


def test_run_cancel_of_a_run_in_another_of_my_conversations_is_refused(user, conversation):
    elsewhere = conversation_create(owner=user)
    result = message_send(conversation=elsewhere, user=user, content="go", client_id="g")
    (reply,) = exchange(
        session_cookie(user), conversation.pk, [{"type": "run.cancel", "run_id": result.run.pk}]
    )
    assert reply["code"] == "not_found"
    result.run.refresh_from_db()
    assert result.run.status == AgentRun.Status.QUEUED


def test_run_cancel_of_another_users_run_is_refused_like_a_missing_one(
    user, other_user, conversation, other_conversation
):
    theirs = message_send(conversation=conversation, user=user, content="mine", client_id="a")
    cookie = session_cookie(other_user)
    replies = exchange(
        cookie,
        other_conversation.pk,
        [
            {"type": "run.cancel", "run_id": theirs.run.pk},
            {"type": "run.cancel", "run_id": theirs.run.pk + 10**6},
        ],
    )
    assert replies[0] == replies[1]
    assert replies[0]["code"] == "not_found"
    theirs.run.refresh_from_db()
    assert theirs.run.status == AgentRun.Status.QUEUED
    assert theirs.run.cancel_requested_at is None


def test_cancelling_a_finished_run_changes_nothing(user, conversation):
    result = message_send(conversation=conversation, user=user, content="go", client_id="g")
    AgentRun.objects.filter(pk=result.run.pk).update(status=AgentRun.Status.SUCCEEDED)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=1)
        assert (await communicator.connect())[0]
        await send(communicator, {"type": "run.cancel", "run_id": result.run.pk})
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await assert_still_open(communicator)
        await communicator.disconnect()

    cookie = session_cookie(user)
    run(body)
    result.run.refresh_from_db()
    assert result.run.status == AgentRun.Status.SUCCEEDED
