"""A paused run over the socket: the pending request replays on connect, the owner decides
once with ``approval.decide``, and every other attempt gets an ``error`` frame."""

from __future__ import annotations

import pytest

from agents.models import AgentRun
from agents.services.conversations import conversation_create
from tests.consumers.sockets import QUIET_SECONDS, receive, run, send, session_cookie, socket
from tests.paused import paused_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_pending_request_replays_and_the_owners_decision_goes_out_live(user, conversation):
    agent_run, approval = paused_run(conversation)
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=0)
        assert (await communicator.connect())[0]
        replayed = await receive(communicator)
        await send(
            communicator,
            {"type": "approval.decide", "approval_id": approval.pk, "approve": True},
        )
        decided = await receive(communicator)
        await send(
            communicator,
            {"type": "approval.decide", "approval_id": approval.pk, "approve": False},
        )
        second = await receive(communicator)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return replayed, decided, second

    replayed, decided, second = run(body)

    assert replayed["type"] == "approval.requested"
    assert replayed["run_id"] == agent_run.pk
    assert replayed["approval_id"] == approval.pk
    assert (replayed["tool"], replayed["tool_input"]) == ("send_mail", {"to": "bob@example.com"})
    assert replayed["expires_at"] > replayed["requested_at"]
    assert decided["type"] == "approval.decided"
    assert decided["seq"] == replayed["seq"] + 1
    assert (decided["decision"], decided["approved"], decided["decided_by"]) == (
        "approved",
        True,
        user.username,
    )
    assert second["type"] == "error"
    assert second["code"] == "already_decided"
    agent_run.refresh_from_db()
    assert agent_run.status == AgentRun.Status.QUEUED


def test_someone_elses_approval_is_refused_as_not_found(user, other_user, conversation):
    _, approval = paused_run(conversation)
    own = conversation_create(owner=other_user, title="Bob's own")
    cookie = session_cookie(other_user)

    async def body():
        communicator = socket(own.pk, cookie=cookie)
        assert (await communicator.connect())[0]
        await send(
            communicator,
            {"type": "approval.decide", "approval_id": approval.pk, "approve": True},
        )
        refused = await receive(communicator)
        await communicator.disconnect()
        return refused

    refused = run(body)

    assert (refused["type"], refused["code"]) == ("error", "not_found")
    approval.refresh_from_db()
    assert approval.decision == ""


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "approval.decide", "approve": True},
        {"type": "approval.decide", "approval_id": "1", "approve": True},
        {"type": "approval.decide", "approval_id": 1, "approve": "yes"},
        {"type": "approval.decide", "approval_id": 1, "approve": False, "reason": 5},
        {"type": "run.continue"},
    ],
)
def test_malformed_decisions_are_refused_and_change_nothing(user, conversation, frame):
    _, approval = paused_run(conversation)
    frame = {**frame, "approval_id": approval.pk} if frame.get("approval_id") == 1 else frame
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=conversation.last_seq)
        assert (await communicator.connect())[0]
        await send(communicator, frame)
        refused = await receive(communicator)
        await communicator.disconnect()
        return refused

    refused = run(body)

    assert (refused["type"], refused["code"]) == ("error", "invalid_field")
    approval.refresh_from_db()
    assert approval.decision == ""


def test_continue_on_a_run_waiting_for_approval_is_refused(user, conversation):
    agent_run, _ = paused_run(conversation)
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, after_seq=conversation.last_seq)
        assert (await communicator.connect())[0]
        await send(communicator, {"type": "run.continue", "run_id": agent_run.pk})
        refused = await receive(communicator)
        await communicator.disconnect()
        return refused

    refused = run(body)

    assert (refused["type"], refused["code"]) == ("error", "not_paused")
    agent_run.refresh_from_db()
    assert (agent_run.status, agent_run.budget_grants) == ("awaiting_approval", 0)
