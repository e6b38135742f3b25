"""Ownership and origin, checked against the real daphne: a stranger learns nothing and
changes nothing, over HTTP or the websocket."""

from __future__ import annotations

import uuid

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from agents.llm.scripted import Gate, Reply
from agents.models import AgentRun, Message, RunEvent
from agents.services.conversations import conversation_create
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FINAL = "Thought: Easy.\nFinal Answer: Hello there."


def _closed_code(sock) -> int:
    with pytest.raises(ConnectionClosed) as closed:
        sock.receive(timeout=10)
    return closed.value.rcvd.code


def test_another_user_cannot_read_send_cancel_or_connect(live_stack, user, other_user):
    model = f"owner-{uuid.uuid4().hex[:8]}"
    # Held until the stranger has tried everything: the run is still going meanwhile.
    answer = Gate()
    live_stack.model.script(model, [answer.hold(Reply(FINAL))])
    conversation = conversation_create(owner=user, profile=live_stack.profile(model))
    owner_socket = live_stack.connect(conversation, user)
    owner_socket.send({"type": "message.send", "content": "hi", "client_id": "c1"})
    created = owner_socket.receive_until(lambda f: f["type"] == "message.created")[-1]
    run_id = created["run_id"]
    answer.wait_arrived()
    base = f"/api/conversations/{conversation.pk}/"
    missing = f"/api/conversations/{conversation.pk + 1000}/"

    assert live_stack.http("GET", base, other_user)[0] == 404
    assert live_stack.http("GET", missing, other_user)[0] == 404
    assert live_stack.http("GET", base, user)[0] == 200
    status, listing = live_stack.http("GET", "/api/conversations/", other_user)
    assert status == 200
    assert conversation.pk not in [c["id"] for c in listing["results"]]
    send = {"content": "let me in", "client_id": "intruder"}
    assert live_stack.http("POST", base + "messages/", other_user, body=send)[0] == 404
    assert live_stack.http("POST", f"/api/runs/{run_id}/cancel/", other_user)[0] == 404
    assert live_stack.http("PATCH", base, other_user, body={"title": "mine now"})[0] == 404
    assert live_stack.http("DELETE", base, other_user)[0] == 404

    assert _closed_code(live_stack.connect(conversation, other_user)) == 4404
    assert _closed_code(live_stack.connect(conversation, None)) == 4404
    # A socket on the stranger's own conversation cannot cancel someone else's run either.
    own = conversation_create(owner=other_user)
    stranger_socket = live_stack.connect(own, other_user)
    stranger_socket.send({"type": "run.cancel", "run_id": run_id})
    refused = stranger_socket.receive_until(lambda f: f["type"] == "error")[-1]
    assert refused["code"] == "not_found"
    assert not AgentRun.objects.get(pk=run_id).is_terminal
    answer.open()

    finished = owner_socket.receive_until(run_ended)[-1]
    assert finished["type"] == "run.finished"
    run = AgentRun.objects.get(pk=run_id)
    assert run.status == AgentRun.Status.SUCCEEDED
    assert run.cancel_requested_at is None
    conversation.refresh_from_db()
    assert conversation.title == "hi"
    roles = Message.objects.filter(conversation=conversation).values_list("role", flat=True)
    assert list(roles) == ["user", "assistant"]
    assert not RunEvent.objects.filter(conversation=own).exists()


@pytest.mark.parametrize("origin", ["http://evil.example", "another port"])
def test_a_foreign_origin_is_refused(live_stack, user, origin):
    conversation = conversation_create(owner=user)
    if origin == "another port":  # a page on daphne's own host, served from another port
        scheme_and_host, port = live_stack.daphne.url.rsplit(":", 1)
        origin = f"{scheme_and_host}:{int(port) + 1}"

    with pytest.raises(InvalidStatus) as refused:
        live_stack.connect(conversation, user, origin=origin)

    assert refused.value.response.status_code == 403
