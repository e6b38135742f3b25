"""What one user can make a daphne process hold: sockets per user, resumes per minute, and
replay pages that wait for the client to read (docs/protocol.md, "Limits")."""

from __future__ import annotations

import functools

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings

from agents.consumers import REPLAY_BATCH
from agents.models import Conversation, RunEvent
from chatsite.asgi import application
from tests.consumers.sockets import (
    ORIGIN,
    QUIET_SECONDS,
    close_code,
    notifications_socket,
    receive,
    run,
    send,
    session_cookie,
    socket,
)

pytestmark = pytest.mark.django_db(transaction=True)


def store_events(conversation: Conversation, count: int) -> None:
    RunEvent.objects.bulk_create(
        RunEvent(conversation=conversation, seq=seq, type="step", payload={"kind": "thought"})
        for seq in range(1, count + 1)
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=count)


# ---- sockets per user ------------------------------------------------------------------------


def test_sockets_past_the_cap_are_closed_with_4429(user, other_user, conversation, settings):
    settings.CHAT_MAX_SOCKETS_PER_USER = 2
    cookie = session_cookie(user)
    other = Conversation.objects.create(owner=other_user)
    other_cookie = session_cookie(other_user)

    async def body():
        first, second, third = (socket(conversation.pk, cookie=cookie) for _ in range(3))
        assert (await first.connect())[0]
        assert (await second.connect())[0]
        assert (await third.connect())[0]  # accepted so the browser sees the code
        refused = await close_code(third)
        others = socket(other.pk, cookie=other_cookie)  # another user is not affected
        assert (await others.connect())[0]
        await send(others, {"type": "ping"})
        other_pong = await receive(others)
        await first.disconnect()
        again = socket(conversation.pk, cookie=cookie)  # a closed one frees its place
        assert (await again.connect())[0]
        await send(again, {"type": "ping"})
        pong = await receive(again)
        for communicator in (second, again, others):
            await communicator.disconnect()
        return refused, other_pong, pong

    refused, other_pong, pong = run(body)
    assert refused == 4429
    assert other_pong == pong == {"type": "pong"}


def test_notification_sockets_past_their_own_cap_are_closed_with_4429(
    user, other_user, conversation, settings
):
    settings.CHAT_MAX_NOTIFICATION_SOCKETS_PER_USER = 2
    settings.CHAT_MAX_SOCKETS_PER_USER = 1
    cookie, other_cookie = session_cookie(user), session_cookie(other_user)

    async def body():
        first, second, third = (notifications_socket(cookie) for _ in range(3))
        for communicator in (first, second, third):
            assert (await communicator.connect())[0]  # accepted so the browser sees the code
        counts = [await receive(first), await receive(second)]
        refused = await close_code(third)
        others = notifications_socket(other_cookie)  # another user is not affected
        assert (await others.connect())[0]
        other_count = await receive(others)
        # The conversations' sockets are counted apart: the chat still opens.
        chat = socket(conversation.pk, cookie=cookie)
        assert (await chat.connect())[0]
        await send(chat, {"type": "ping"})
        chat_pong = await receive(chat)
        await first.disconnect()
        again = notifications_socket(cookie)  # a closed one frees its place
        assert (await again.connect())[0]
        again_count = await receive(again)
        for communicator in (second, again, others, chat):
            await communicator.disconnect()
        return counts, refused, other_count, chat_pong, again_count

    counts, refused, other_count, chat_pong, again_count = run(body)
    assert refused == 4429
    unread = {"type": "notifications.unread", "unread": 0}
    assert counts == [unread, unread]
    assert other_count == again_count == unread
    assert chat_pong == {"type": "pong"}


# ---- resume ----------------------------------------------------------------------------------


def test_resume_is_rate_limited_and_the_socket_stays(user, conversation, settings):
    settings.CHAT_RESUMES_PER_MINUTE = 2
    store_events(conversation, 3)
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=3)
        assert (await communicator.connect())[0]
        replies = []
        for _ in range(3):
            await send(communicator, {"type": "resume", "after_seq": 1})
            reply = [await receive(communicator)]
            if reply[0]["type"] != "error":
                reply.append(await receive(communicator))
            replies.append(reply)
        await send(communicator, {"type": "ping"})
        pong = await receive(communicator)
        await communicator.disconnect()
        return replies, pong

    replies, pong = run(body)
    assert [[frame.get("seq") for frame in pair] for pair in replies[:2]] == [[2, 3], [2, 3]]
    refused = replies[2][0]
    assert refused["type"] == "error"
    assert refused["code"] == "rate_limited"
    assert pong == {"type": "pong"}


# ---- replay pages wait for the client to read -----------------------------------------------


class FakeTransport:
    """Twisted's side of back-pressure, as daphne's transport offers it: the transport pauses
    its producer once a page is waiting to be written, and resumes it when told the client
    read it."""

    def __init__(self) -> None:
        self.producer = None
        self.sent = 0

    def registerProducer(self, producer, streaming: bool) -> None:
        assert streaming
        self.producer = producer

    def wrote(self) -> None:
        self.sent += 1
        if self.sent % REPLAY_BATCH == 0:
            self.producer.pauseProducing()


class FakeProtocol:
    def __init__(self) -> None:
        self.transport = FakeTransport()


def daphne_shaped(protocol: FakeProtocol):
    """The application, handed a ``send`` shaped like daphne's: a partial on its protocol."""

    async def app(scope, receive, send):
        async def reply(protocol, message):
            if message["type"] == "websocket.send":
                protocol.transport.wrote()
            await send(message)

        return await application(scope, receive, functools.partial(reply, protocol))

    return app


def paced_socket(conversation_id: int, cookie: str, protocol: FakeProtocol):
    headers = [
        (b"host", b"localhost"),
        (b"origin", ORIGIN.encode()),
        (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()),
    ]
    path = f"/ws/conversations/{conversation_id}/"
    return WebsocketCommunicator(daphne_shaped(protocol), path, headers=headers)


def test_the_replay_reads_its_next_page_only_once_the_client_read_the_last(user, conversation):
    store_events(conversation, 2 * REPLAY_BATCH + 50)
    cookie = session_cookie(user)
    protocol = FakeProtocol()

    async def body():
        communicator = paced_socket(conversation.pk, cookie, protocol)
        assert (await communicator.connect())[0]
        pages = []
        for _ in range(3):
            page = [(await receive(communicator))["seq"] for _ in range(REPLAY_BATCH)][:1]
            waited = await communicator.receive_nothing(timeout=QUIET_SECONDS)
            pages.append((page[0], waited))
            protocol.transport.producer.resumeProducing()
            if len(pages) == 2:
                rest = [(await receive(communicator))["seq"] for _ in range(50)]
                assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
                await communicator.disconnect()
                return pages, rest
        return pages, []

    pages, rest = run(body)
    # Each page of REPLAY_BATCH frames is followed by silence until the client has read it.
    assert pages == [(1, True), (REPLAY_BATCH + 1, True)]
    assert rest == list(range(2 * REPLAY_BATCH + 1, 2 * REPLAY_BATCH + 51))


def test_a_client_that_stops_reading_is_closed_with_4408(user, conversation, settings):
    settings.CHAT_SOCKET_DRAIN_TIMEOUT_SECONDS = 0.5
    store_events(conversation, 3 * REPLAY_BATCH)
    cookie = session_cookie(user)
    protocol = FakeProtocol()

    async def body():
        communicator = paced_socket(conversation.pk, cookie, protocol)
        assert (await communicator.connect())[0]
        received = 0
        while True:
            output = await communicator.receive_output(timeout=10)
            if output["type"] == "websocket.close":
                return received, output.get("code")
            received += 1

    received, code = run(body)
    assert received == REPLAY_BATCH  # one page, not the whole log
    assert code == 4408
