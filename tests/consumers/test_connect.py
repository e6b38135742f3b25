"""Who may open a conversation's socket: its owner, from an allowed Origin, and nobody else."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

from agents import events
from agents.protocol import CLOSE_NOT_FOUND
from tests.consumers.sockets import QUIET_SECONDS, receive, run, send, session_cookie, socket
from tests.group import subscribed_in_redis
from tests.sign_ins import ENDINGS, end_sign_in

pytestmark = pytest.mark.django_db(transaction=True)


async def _outcome(communicator) -> tuple[str, int | None]:
    """("open", None), ("closed", code) after an accept, or ("rejected", code) at handshake."""
    connected, code = await communicator.connect()
    if not connected:
        return ("rejected", code)
    if await communicator.receive_nothing(timeout=QUIET_SECONDS):
        await communicator.disconnect()
        return ("open", None)
    output = await communicator.receive_output(timeout=10)
    assert output["type"] == "websocket.close", output
    return ("closed", output.get("code"))


def test_owner_connects_and_gets_pong(user, conversation):
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie)
        connected, _ = await communicator.connect()
        assert connected
        await send(communicator, {"type": "ping"})
        assert await receive(communicator) == {"type": "pong"}
        await communicator.disconnect()

    run(body)


def test_other_user_anonymous_and_missing_are_refused_alike(user, other_user, conversation):
    stranger = session_cookie(other_user)
    owner = session_cookie(user)
    missing_id = conversation.pk + 1000

    async def body():
        return [
            await _outcome(socket(conversation.pk, cookie=stranger)),
            await _outcome(socket(conversation.pk)),
            await _outcome(socket(missing_id, cookie=owner)),
            await _outcome(socket(missing_id)),
        ]

    outcomes = run(body)
    assert outcomes == [("closed", CLOSE_NOT_FOUND)] * 4


@pytest.mark.parametrize("ended_by", ENDINGS)
def test_an_ended_sign_in_cannot_open_its_owners_conversation(user, conversation, ended_by):
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    end_sign_in(ended_by, user=user, client=client)

    async def body():
        return await _outcome(socket(conversation.pk, cookie=cookie))

    assert run(body) == ("closed", CLOSE_NOT_FOUND)


def test_a_refused_socket_gets_no_frames(other_user, conversation):
    from agents.runs.log import event_append

    event_append(conversation=conversation, run=None, type="step", payload={"kind": "thought"})
    stranger = session_cookie(other_user)

    async def body():
        communicator = socket(conversation.pk, cookie=stranger, after_seq=0)
        connected, _ = await communicator.connect()
        assert connected
        output = await communicator.receive_output(timeout=10)
        return output

    assert run(body) == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}


def test_a_refused_socket_gets_no_frame_published_after_it_was_refused(other_user, conversation):
    """It joined the conversation's group before it was decided (to miss nothing if it
    opens); refused, it left, and nothing published to the group reaches it."""
    from channels.db import database_sync_to_async

    from agents.runs.log import event_append

    stranger = session_cookie(other_user)
    append = database_sync_to_async(event_append)

    async def body():
        communicator = socket(conversation.pk, cookie=stranger)
        connected, _ = await communicator.connect()
        assert connected
        closed = await communicator.receive_output(timeout=10)
        await append(conversation=conversation, run=None, type="step", payload={"kind": "x"})
        quiet = await communicator.receive_nothing(timeout=QUIET_SECONDS)
        return closed, quiet

    assert run(body) == ({"type": "websocket.close", "code": CLOSE_NOT_FOUND}, True)


# Cross-site and Origin-less handshakes: tests/security/test_sockets_and_forms.py.


def test_a_closed_socket_leaves_its_group_without_channels_shared_thread(
    user, conversation, monkeypatch
):
    # Channels' own disconnect handler hops to its one thread-sensitive thread to close that
    # thread's connections; this consumer uses other threads, so the hop would only queue
    # every closing socket of the process behind one thread.
    hops = []

    async def close_old_connections_hop():
        hops.append(1)

    monkeypatch.setattr(
        "channels.generic.websocket.aclose_old_connections", close_old_connections_hop
    )
    group = f"{settings.CHANNEL_LAYERS['default']['CONFIG']['prefix']}__group__"
    group += events.group_name(conversation.pk)
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie)
        assert (await communicator.connect())[0]
        joined = group in await subscribed_in_redis()
        await communicator.disconnect()
        return joined, group in await subscribed_in_redis()

    assert run(body) == (True, False)
    assert hops == []
