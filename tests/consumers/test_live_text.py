"""A socket that joins while a run is writing gets the text so far after the replay, then the
rest (agents/live.py, docs/protocol.md "Live text")."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from agents import events, live
from agents.models import AgentRun
from agents.react.types import ThoughtDelta
from agents.services.conversations import message_send
from tests.consumers.sockets import QUIET_SECONDS, receive, run, session_cookie, socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(user, conversation):
    """A run in progress and the live text its worker keeps; the keys go with the test."""
    sent = message_send(conversation=conversation, user=user, content="Add 2 and 2.")
    text = live.LiveText(conversation_id=conversation.pk, run_id=sent.run.pk, attempt=1)
    yield sent.run, text
    text.settle()


def splice(have: str, frame: dict) -> str:
    overlap = len(have) - frame["offset"]
    assert overlap >= 0, f"a gap before {frame}"
    return have + frame["text"][overlap:]


def test_a_socket_joining_mid_answer_gets_the_text_so_far_then_the_rest(
    user, conversation, running
):
    agent_run, text = running
    text.thought_delta(ThoughtDelta(call_index=0, offset=0, text="I should add them.", done=True))
    text.answer_delta("The sum ")
    text.answer_delta("of 2 and 2 ")
    text.flush()
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie)
        assert (await communicator.connect())[0]
        first = [await receive(communicator) for _ in range(3)]
        await sync_to_async(text.answer_delta)("is 4.")
        await sync_to_async(events.publish_flush)()
        later = await receive(communicator)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return first, later

    (replayed, thought, answer), later = run(body)
    assert replayed["type"] == "message.created"
    assert thought == {
        "type": "thought.delta",
        "run_id": agent_run.pk,
        "segment": "1.1",
        "offset": 0,
        "text": "I should add them.",
    }
    assert answer["type"] == "answer.delta"
    assert answer["offset"] == 0
    assert answer["text"] == "The sum of 2 and 2 "
    assert later["segment"] == answer["segment"]
    assert splice(answer["text"], later) == "The sum of 2 and 2 is 4."


def only_the_replay(user, conversation) -> list[str]:
    """The types of what a joining socket gets, once nothing more comes."""
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie)
        assert (await communicator.connect())[0]
        frames = [await receive(communicator)]
        while not await communicator.receive_nothing(timeout=QUIET_SECONDS):
            frames.append(await receive(communicator))
        await communicator.disconnect()
        return [frame["type"] for frame in frames]

    return run(body)


def test_text_of_a_run_that_ended_is_not_sent(user, conversation, running):
    agent_run, text = running
    text.answer_delta("Half an answer")
    AgentRun.objects.filter(pk=agent_run.pk).update(status=AgentRun.Status.FAILED)
    assert only_the_replay(user, conversation) == ["message.created"]


def test_after_the_step_is_stored_a_joining_socket_gets_no_live_text(user, conversation, running):
    _, text = running
    text.thought_delta(ThoughtDelta(call_index=0, offset=0, text="Thinking…"))
    text.settle()
    assert only_the_replay(user, conversation) == ["message.created"]


def test_without_a_queued_or_running_run_the_opening_reads_no_live_text(
    user, conversation, running, monkeypatch
):
    agent_run, text = running
    text.answer_delta("Half an answer")  # left in Redis, as by a worker that died
    text.flush()
    AgentRun.objects.filter(pk=agent_run.pk).update(status=AgentRun.Status.FAILED)
    reads = []
    read_live_text = live.live_frames

    async def counted(conversation_id):
        reads.append(conversation_id)
        return await read_live_text(conversation_id)

    monkeypatch.setattr(live, "live_frames", counted)

    assert only_the_replay(user, conversation) == ["message.created"]
    assert reads == []
    # A run in progress: the opening reads it.
    AgentRun.objects.filter(pk=agent_run.pk).update(status=AgentRun.Status.RUNNING)
    only_the_replay(user, conversation)
    assert reads == [conversation.pk]
