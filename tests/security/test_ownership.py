"""User B against user A's conversation, message and run ids, over HTTP and the websocket.

Every attempt is refused exactly as if the id did not exist (same status, same body, same
close code), and A's data is unchanged afterwards.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from agents.models import AgentProfile, AgentRun, Conversation, Message, RunEvent
from agents.protocol import CLOSE_NOT_FOUND
from agents.runs.log import event_append
from agents.services.conversations import conversation_create, message_send
from tests.api.endpoints import conversation_endpoints, endpoints
from tests.consumers.sockets import QUIET_SECONDS, receive, run, send, session_cookie, socket

MISSING = 10**9


@pytest.fixture
def alices(user):
    """Alice's conversation with a message, a queued run and a few events, and a second one."""
    conversation = conversation_create(owner=user, title="Alice's secret plans")
    sent = message_send(conversation=conversation, user=user, content="my secret", client_id="s")
    event_append(conversation=conversation, run=sent.run, type="step", payload={"kind": "thought"})
    return {"conversation": conversation, "message": sent.message, "run": sent.run}


def alices_data(user) -> tuple:
    return (
        list(
            Conversation.objects.filter(owner=user)
            .order_by("pk")
            .values_list("pk", "title", "archived", "last_seq", "profile_id", "updated_at")
        ),
        list(
            Message.objects.filter(conversation__owner=user)
            .order_by("pk")
            .values_list("pk", "content", "client_id")
        ),
        list(
            AgentRun.objects.filter(conversation__owner=user)
            .order_by("pk")
            .values_list("pk", "status", "cancel_requested_at", "finished_at")
        ),
        list(
            RunEvent.objects.filter(conversation__owner=user)
            .order_by("pk")
            .values_list("pk", "seq", "type", "payload")
        ),
    )


# ---- HTTP ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_bob_gets_404_from_every_endpoint_naming_alices_ids(user, other_user, alices):
    bob = Client()
    bob.force_login(other_user)
    before = alices_data(user)
    against_alice = endpoints(
        conversation_id=alices["conversation"].pk,
        message_id=alices["message"].pk,
        run_id=alices["run"].pk,
    )
    against_nothing = endpoints(conversation_id=MISSING, message_id=MISSING, run_id=MISSING)
    checked = 0
    for alice_endpoint, missing_endpoint in zip(against_alice, against_nothing, strict=True):
        if alice_endpoint.path == missing_endpoint.path:
            continue  # no id in the path: the collections, covered below
        foreign = alice_endpoint.call(bob)
        missing = missing_endpoint.call(bob)
        assert foreign.status_code == 404, alice_endpoint
        assert (foreign.status_code, foreign.json()) == (missing.status_code, missing.json())
        checked += 1
    assert checked == 17
    assert alices_data(user) == before


@pytest.mark.django_db
def test_bobs_lists_and_searches_never_show_alices_conversations(user, other_user, alices):
    bob = Client()
    bob.force_login(other_user)
    conversation_create(owner=other_user, title="Bob's")
    for query in ({}, {"q": "secret"}, {"q": "Alice"}, {"archived": "1"}):
        body = bob.get("/api/conversations/", query).json()
        assert alices["conversation"].pk not in [row["id"] for row in body["results"]], query
    assert bob.get("/api/conversations/", {"q": "secret"}).json()["count"] == 0


@pytest.mark.django_db
def test_bob_cannot_use_a_profile_restricted_to_alices_group(user, other_user):
    group = Group.objects.create(name="alices-team")
    user.groups.add(group)
    private = AgentProfile.objects.create(name="Team", slug="team")
    private.allowed_groups.add(group)
    bobs = conversation_create(owner=other_user)
    bob = Client()
    bob.force_login(other_user)
    assert "team" not in [row["slug"] for row in bob.get("/api/profiles/").json()]
    created = bob.post("/api/conversations/", {"profile": "team"}, content_type="application/json")
    assert created.status_code == 400
    sent = bob.post(
        f"/api/conversations/{bobs.pk}/messages/",
        {"content": "hi", "profile": "team"},
        content_type="application/json",
    )
    assert (sent.status_code, sent.json()["code"]) == (400, "profile_not_allowed")
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_alice_still_reaches_her_own_conversation(user, alices):
    """The matrix above is not passing because every endpoint is broken."""
    alice = Client()
    alice.force_login(user)
    for endpoint in conversation_endpoints(conversation_id=alices["conversation"].pk):
        if endpoint.method == "GET":
            assert endpoint.call(alice).status_code == 200, endpoint


# ---- websocket -------------------------------------------------------------------------------


async def _refusal(communicator) -> tuple:
    connected, code = await communicator.connect()
    if not connected:
        return ("rejected", code)
    output = await communicator.receive_output(timeout=10)
    return (output["type"], output.get("code"))


@pytest.mark.django_db(transaction=True)
def test_bob_cannot_open_alices_conversation_socket(user, other_user, alices):
    before = alices_data(user)
    bob = session_cookie(other_user)

    async def body():
        return [
            await _refusal(socket(alices["conversation"].pk, cookie=bob)),
            await _refusal(socket(alices["conversation"].pk, cookie=bob, after_seq=0)),
            await _refusal(socket(MISSING, cookie=bob)),
        ]

    assert run(body) == [("websocket.close", CLOSE_NOT_FOUND)] * 3
    assert alices_data(user) == before


@pytest.mark.django_db(transaction=True)
def test_bobs_frames_naming_alices_ids_are_refused_like_missing_ones(
    user, other_user, alices, other_conversation
):
    before = alices_data(user)
    bob = session_cookie(other_user)
    run_id = alices["run"].pk

    async def body():
        communicator = socket(other_conversation.pk, cookie=bob, after_seq=0)
        assert (await communicator.connect())[0]
        replies = []
        for frame in (
            {"type": "run.cancel", "run_id": run_id},
            {"type": "run.cancel", "run_id": MISSING},
        ):
            await send(communicator, frame)
            replies.append(await receive(communicator))
        # seq numbers are per conversation: resuming from 0 shows Bob only his own, empty log,
        # so the next frame he gets is the pong.
        await send(communicator, {"type": "resume", "after_seq": 0})
        await send(communicator, {"type": "ping"})
        replies.append(await receive(communicator))
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return replies

    cancel_alices, cancel_missing, pong = run(body)
    assert cancel_alices == cancel_missing
    assert cancel_alices["code"] == "not_found"
    assert pong == {"type": "pong"}
    assert alices_data(user) == before


@pytest.mark.django_db(transaction=True)
def test_a_send_on_bobs_socket_never_lands_in_alices_conversation(user, other_user, alices):
    before = alices_data(user)
    bobs = conversation_create(owner=other_user)
    bob = session_cookie(other_user)

    async def body():
        communicator = socket(bobs.pk, cookie=bob, after_seq=0)
        assert (await communicator.connect())[0]
        # A field naming Alice's conversation is not part of the protocol and is ignored.
        await send(
            communicator,
            {
                "type": "message.send",
                "content": "hello",
                "client_id": "s",
                "conversation_id": alices["conversation"].pk,
            },
        )
        created = await receive(communicator)
        await communicator.disconnect()
        return created

    created = run(body)
    assert created["type"] == "message.created"
    assert Message.objects.get(pk=created["message"]["id"]).conversation_id == bobs.pk
    assert alices_data(user) == before
