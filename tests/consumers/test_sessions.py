"""A socket lives no longer than the sign-in that opened it (docs/protocol.md, close 4401)."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.test import Client

from agents import events
from agents.models import AgentRun, Message
from agents.services.conversations import conversation_create, message_send
from tests.consumers.sockets import client_id, close_code, receive, run, send, socket
from tests.group import subscribed_in_redis
from tests.sign_ins import end_sign_in

pytestmark = pytest.mark.django_db(transaction=True)

SEND = {"type": "message.send", "content": "still there?"}


def signed_in_client(user) -> tuple[Client, str]:
    client = Client()
    client.force_login(user)
    return client, client.cookies[settings.SESSION_COOKIE_NAME].value


def test_logout_closes_the_sockets_of_that_sign_in_only(user, conversation):
    browser, cookie = signed_in_client(user)
    _other_device, other_cookie = signed_in_client(user)

    async def body():
        mine = socket(conversation.pk, cookie=cookie)
        other = socket(conversation.pk, cookie=other_cookie)
        assert (await mine.connect())[0]
        assert (await other.connect())[0]
        await database(browser.logout)
        signed_out = await receive(mine)
        code = await close_code(mine)
        await send(other, {"type": "ping"})
        still_open = await receive(other)
        await other.disconnect()
        return signed_out, code, still_open

    signed_out, code, still_open = run(body)

    assert signed_out == {"type": "error", "code": "signed_out", "message": "You have signed out."}
    assert code == 4401
    assert still_open == {"type": "pong"}


def test_logout_closes_that_sign_in_s_sockets_on_every_conversation(user, conversation):
    second_conversation = conversation_create(owner=user, title="Second")
    browser, cookie = signed_in_client(user)

    async def body():
        sockets = [
            socket(conversation.pk, cookie=cookie),
            socket(second_conversation.pk, cookie=cookie),
        ]
        for communicator in sockets:
            assert (await communicator.connect())[0]
        # One closed and opened again before the logout: forgetting the closed socket
        # keeps the sign-in's other sockets.
        await sockets[0].disconnect()
        sockets[0] = socket(conversation.pk, cookie=cookie)
        assert (await sockets[0].connect())[0]
        await database(browser.logout)
        return [(await receive(each))["code"] for each in sockets], [
            await close_code(each) for each in sockets
        ]

    codes, closes = run(body)

    assert codes == ["signed_out", "signed_out"]
    assert closes == [4401, 4401]


def test_a_password_changed_elsewhere_closes_the_other_sign_ins_sockets(user, conversation):
    """Without any write from the socket: it neither reads nor hears anything more."""
    _laptop, cookie = signed_in_client(user)
    phone, _ = signed_in_client(user)

    def change_password() -> None:
        response = phone.post(
            "/accounts/password/",
            {
                "old_password": "pw-for-tests-1",
                "new_password1": "a-new-pass-phrase-77",
                "new_password2": "a-new-pass-phrase-77",
            },
        )
        assert response.status_code == 302

    async def body():
        laptop_socket = socket(conversation.pk, cookie=cookie)
        assert (await laptop_socket.connect())[0]
        await database(change_password)
        signed_out = await receive(laptop_socket)
        return signed_out, await close_code(laptop_socket)

    signed_out, code = run(body)

    assert signed_out["code"] == "signed_out"
    assert code == 4401


def test_a_sign_out_notice_without_a_sign_in_changes_nothing(user, conversation):
    browser, cookie = signed_in_client(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie)
        assert (await communicator.connect())[0]
        layer = get_channel_layer()
        await layer.group_send(events.SIGNED_OUT_GROUP, {"type": events.SIGNED_OUT_MESSAGE_TYPE})
        await send(communicator, {"type": "ping"})
        pong = await receive(communicator)
        await database(browser.logout)  # the listener still passes the next one on
        return pong, await receive(communicator), await close_code(communicator)

    pong, signed_out, code = run(body)

    assert pong == {"type": "pong"}
    assert (signed_out["code"], code) == ("signed_out", 4401)


def test_sockets_of_many_sign_ins_share_one_sign_out_subscription(user, conversation):
    """A socket subscribes to its conversation's group only: not to a group of its own
    sign-in, nor (chatsite/server/patches/channels_redis.py) to its own channel."""
    cookies = [signed_in_client(user)[1] for _ in range(3)]
    prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]

    async def body():
        sockets = [socket(conversation.pk, cookie=cookie) for cookie in cookies]
        for communicator in sockets:
            assert (await communicator.connect())[0]
        subscribed = await subscribed_in_redis()
        for communicator in sockets:
            await communicator.disconnect()
        return subscribed

    subscribed = run(body)

    # Other tests' sockets of this process may still hold their conversations' groups.
    assert {
        f"{prefix}__group__{events.group_name(conversation.pk)}",
        f"{prefix}__group__{events.SIGNED_OUT_GROUP}",
    } <= subscribed
    assert [name for name in subscribed if "__group__" not in name] == []  # no own channels
    groups = [name.split("__group__", 1)[1] for name in subscribed if "__group__" in name]
    assert [name for name in groups if not name.startswith("conversation.")] == [
        events.SIGNED_OUT_GROUP
    ]


@pytest.mark.parametrize(
    "ended_by", ["session deleted", "session expired", "password changed", "user deactivated"]
)
@pytest.mark.parametrize("frame_type", ["message.send", "run.cancel"])
def test_a_write_after_the_session_ended_is_refused_and_closes_the_socket(
    user, conversation, ended_by, frame_type
):
    """Even when the logout's message never reached the socket (no signal, or it was lost)."""
    _browser, cookie = signed_in_client(user)
    run_id = message_send(conversation=conversation, user=user, content="first").run.pk
    if frame_type == "message.send":
        frame = {**SEND, "client_id": client_id()}
    else:
        frame = {"type": "run.cancel", "run_id": run_id}

    def end_the_session() -> None:
        end_sign_in(ended_by, user=user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=conversation.last_seq)
        assert (await communicator.connect())[0]
        await database(end_the_session)
        await send(communicator, frame)
        reply = await receive(communicator)
        return reply, await close_code(communicator)

    reply, code = run(body)

    assert reply["code"] == "signed_out"
    assert code == 4401
    assert Message.objects.count() == 1
    assert AgentRun.objects.get(pk=run_id).status == AgentRun.Status.QUEUED


async def database(function):
    from channels.db import database_sync_to_async

    return await database_sync_to_async(function)()
