"""Replay after `after_seq`, then live frames, each stored seq exactly once per socket."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from agents import events, protocol
from agents.consumers import REPLAY_BATCH
from agents.models import Conversation, RunEvent
from agents.protocol import CLOSE_NOT_FOUND
from agents.runs.log import event_append
from agents.services.conversations import conversation_delete
from tests.consumers.sockets import (
    QUIET_SECONDS,
    receive,
    receive_seqs,
    run,
    send,
    session_cookie,
    socket,
)

pytestmark = pytest.mark.django_db(transaction=True)


def append(conversation: Conversation, text: str, *, type: str = "step", run=None) -> RunEvent:
    return event_append(
        conversation=conversation, run=run, type=type, payload={"kind": "thought", "text": text}
    )


append_async = database_sync_to_async(append)


def store_without_publishing(conversation: Conversation, count: int) -> None:
    """Events written while no frame reached the layer, as when Redis lost them."""
    start = conversation.last_seq
    RunEvent.objects.bulk_create(
        RunEvent(conversation=conversation, seq=seq, type="step", payload={"kind": "thought"})
        for seq in range(start + 1, start + count + 1)
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=start + count)
    conversation.last_seq = start + count


async def layer_send(conversation_id: int, frame: dict) -> None:
    await get_channel_layer().group_send(
        events.group_name(conversation_id), {"type": events.GROUP_MESSAGE_TYPE, "frames": [frame]}
    )


def test_replays_after_seq_in_order_then_forwards_live(user, conversation):
    for n in range(5):
        append(conversation, f"stored {n}")
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=2)
        assert (await communicator.connect())[0]
        replayed = [await receive(communicator) for _ in range(3)]
        await append_async(conversation, "live 1")
        await append_async(conversation, "live 2")
        live = await receive_seqs(communicator, 2)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return replayed, live

    replayed, live = run(body)
    assert [frame["seq"] for frame in replayed] == [3, 4, 5]
    assert [frame["text"] for frame in replayed] == ["stored 2", "stored 3", "stored 4"]
    assert {frame["type"] for frame in replayed} == {"step"}
    assert all("ts" in frame and "run_id" in frame for frame in replayed)
    assert live == [6, 7]


def test_without_after_seq_everything_is_replayed(user, conversation):
    for n in range(3):
        append(conversation, f"stored {n}")
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie)
        assert (await communicator.connect())[0]
        seqs = await receive_seqs(communicator, 3)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return seqs

    assert run(body) == [1, 2, 3]


def test_a_live_frame_already_replayed_is_dropped(user, conversation):
    """The race replay guards against: an event read from the log whose live frame comes later."""
    stored = [append(conversation, f"stored {n}") for n in range(3)]
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        assert await receive_seqs(communicator, 3) == [1, 2, 3]
        for event in stored:
            await layer_send(conversation.pk, protocol.event_frame(event))
        await append_async(conversation, "new")
        after = await receive_seqs(communicator, 1)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return after

    assert run(body) == [4]


def test_a_gap_in_live_frames_is_filled_from_the_log(user, conversation):
    append(conversation, "first")
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        assert await receive_seqs(communicator, 1) == [1]
        await database_sync_to_async(store_without_publishing)(conversation, 2)
        await append_async(conversation, "after the lost ones")
        seqs = await receive_seqs(communicator, 3)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return seqs

    assert run(body) == [2, 3, 4]


def test_replay_longer_than_one_batch(user, conversation):
    total = REPLAY_BATCH * 2 + 7
    store_without_publishing(conversation, total)
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=5)
        assert (await communicator.connect())[0]
        seqs = await receive_seqs(communicator, total - 5)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return seqs

    assert run(body) == list(range(6, total + 1))


@pytest.mark.parametrize("after_seq", [1, 99], ids=["the last seq", "beyond the log"])
def test_a_client_that_has_everything_reads_no_log_and_gets_new_events(
    user, conversation, monkeypatch, after_seq
):
    from agents.consumers import ConversationConsumer

    append(conversation, "only")
    log_reads = []
    read_log = ConversationConsumer._frames_after

    async def counted(self, after_seq):
        log_reads.append(after_seq)
        return await read_log(self, after_seq)

    monkeypatch.setattr(ConversationConsumer, "_frames_after", counted)
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=after_seq)
        assert (await communicator.connect())[0]
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await append_async(conversation, "next")
        seqs = await receive_seqs(communicator, 1)
        await communicator.disconnect()
        return seqs

    assert run(body) == [2]
    assert log_reads == []


def test_an_event_stored_while_the_socket_opens_arrives_once(user, conversation, monkeypatch):
    """Committed after the socket joined its group and before it read the last seq: the
    read sees it, so it is replayed; its live frame, queued meanwhile, is then dropped."""
    from agents.consumers import ConversationConsumer

    append(conversation, "seen")
    open_as_owner = ConversationConsumer._open_as_owner

    async def stored_meanwhile(self):
        await append_async(conversation, "while opening")
        return await open_as_owner(self)

    monkeypatch.setattr(ConversationConsumer, "_open_as_owner", stored_meanwhile)
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=1)
        assert (await communicator.connect())[0]
        frame = await receive(communicator)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return frame

    frame = run(body)
    assert (frame["seq"], frame["text"]) == (2, "while opening")


@pytest.mark.parametrize("after_seq", ["-3", "abc", ""])
def test_malformed_after_seq_replays_everything(user, conversation, after_seq):
    append(conversation, "one")
    append(conversation, "two")
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=after_seq)
        assert (await communicator.connect())[0]
        seqs = await receive_seqs(communicator, 2)
        await communicator.disconnect()
        return seqs

    assert run(body) == [1, 2]


def test_resume_sends_again_what_the_client_asks_for_then_live_once(user, conversation):
    for n in range(4):
        append(conversation, f"stored {n}")
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        first = await receive_seqs(communicator, 4)
        await send(communicator, {"type": "resume", "after_seq": 2})
        again = await receive_seqs(communicator, 2)
        await append_async(conversation, "live")
        live = await receive_seqs(communicator, 1)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return first, again, live

    assert run(body) == ([1, 2, 3, 4], [3, 4], [5])


def test_two_sockets_on_one_conversation_see_the_same_frames(user, conversation):
    append(conversation, "before")
    cookie = session_cookie(user)

    async def body():
        tabs = [socket(conversation.pk, cookie=cookie, after_seq=0) for _ in range(2)]
        for tab in tabs:
            assert (await tab.connect())[0]
            assert await receive_seqs(tab, 1) == [1]
        await append_async(conversation, "live")
        seen = [await receive_seqs(tab, 1) for tab in tabs]
        for tab in tabs:
            await tab.disconnect()
        return seen

    assert run(body) == [[2], [2]]


def test_answer_deltas_are_forwarded_until_their_run_ends(user, conversation):
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        delta = {"type": "answer.delta", "run_id": 41, "text": "Hel"}
        await layer_send(conversation.pk, delta)
        forwarded = await receive(communicator)
        await layer_send(
            conversation.pk,
            {"type": "run.finished", "seq": 1, "run_id": 41, "ts": "t", "message": {}},
        )
        finished = await receive(communicator)
        await layer_send(conversation.pk, {"type": "answer.delta", "run_id": 41, "text": "lo"})
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return forwarded, finished

    forwarded, finished = run(body)
    assert forwarded == {"type": "answer.delta", "run_id": 41, "text": "Hel"}
    assert finished["type"] == "run.finished"


def test_a_deleted_conversation_closes_the_socket_on_the_next_frame(user, conversation):
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        await database_sync_to_async(conversation_delete)(conversation=conversation)
        await send(communicator, {"type": "resume", "after_seq": 0})
        error = await receive(communicator)
        closed = await communicator.receive_output(timeout=10)
        return error, closed

    error, closed = run(body)
    assert error["code"] == "not_found"
    assert closed == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}


def test_the_replayed_frames_equal_the_api_fetch(user, conversation, client):
    """A client that rebuilds from the socket and one that fetches over HTTP agree."""
    from agents.services.conversations import message_send, run_cancel

    sent = message_send(conversation=conversation, user=user, content="hi", client_id="a")
    run_cancel(run=sent.run, user=user)
    append(conversation, "after")
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        frames = [await receive(communicator) for _ in range(3)]
        await communicator.disconnect()
        return frames

    replayed = run(body)
    client.force_login(user)
    fetched = client.get(f"/api/conversations/{conversation.pk}/").json()["events"]
    assert replayed == fetched
    assert [frame["type"] for frame in replayed] == ["message.created", "run.cancelled", "step"]


def test_a_replayed_frame_is_the_text_the_live_frame_was(user, conversation):
    """The replay reads rows with plain SQL (``selectors.event_rows_after``), the live path
    builds frames from the model instances it stored: the socket sends the same text."""
    payload = {"kind": "observation", "text": "ünïcode ✓", "nested": {"n": [1, 2.5, None]}}
    cookie = session_cookie(user)

    async def body():
        live_socket = socket(conversation.pk, cookie=cookie)
        assert (await live_socket.connect())[0]
        await database_sync_to_async(event_append)(
            conversation=conversation, run=None, type="step", payload=payload
        )
        live = await live_socket.receive_from(timeout=10)
        await live_socket.disconnect()
        replay_socket = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await replay_socket.connect())[0]
        replayed = await replay_socket.receive_from(timeout=10)
        await replay_socket.disconnect()
        return live, replayed

    live, replayed = run(body)
    assert replayed == live
    assert json.loads(replayed)["nested"] == {"n": [1, 2.5, None]}
