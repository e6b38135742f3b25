"""Per-user limits through a real daphne and worker: sends per minute and a daily token
quota counted from what real runs used. Both answer with a clear code and message over the
socket (an ``error`` frame, the socket stays open) and over the API (429), write nothing,
and leave other users alone. Unit-level refusals are in tests/consumers and tests/api."""

from __future__ import annotations

import time
import uuid

import pytest

from agents.llm.scripted import Reply
from agents.models import AgentRun, Message
from agents.services.conversations import conversation_create
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _daphne(spawn_daphne, **limits: str):
    # Its own cache prefix: the per-minute counters of earlier tests are not this test's.
    return spawn_daphne(CACHE_PREFIX=f"limits-{uuid.uuid4().hex}", **limits)


def _send(
    live_stack, daphne, conversation, user, content: str, *, wait_for_run: bool = True
) -> list[dict]:
    sock = live_stack.connect(conversation, user, daphne=daphne)
    client_id = uuid.uuid4().hex
    sock.send({"type": "message.send", "content": content, "client_id": client_id})
    first = sock.receive_until(lambda f: f["type"] in ("message.created", "error"))
    if first[-1]["type"] == "error":
        sock.send({"type": "ping"})
        return [*first, sock.receive_until(lambda f: f["type"] == "pong")[-1]]
    return first + sock.receive_until(run_ended) if wait_for_run else first


def _post(live_stack, daphne, conversation, user, content: str) -> tuple[int, dict]:
    previous, live_stack.daphne = live_stack.daphne, daphne
    try:
        path = f"/api/conversations/{conversation.pk}/messages/"
        return live_stack.http("POST", path, user, body={"content": content})
    finally:
        live_stack.daphne = previous


def test_daily_token_quota_from_real_runs(live_stack, spawn_daphne, user, other_user):
    model = f"quota-{uuid.uuid4().hex[:8]}"
    live_stack.model.policy(model, lambda body: Reply("Final Answer: fine"))
    profile = live_stack.profile(model, tools=())
    daphne = _daphne(spawn_daphne, CHAT_DAILY_TOKEN_QUOTA="50")

    spent = conversation_create(owner=user, profile=profile)
    frames = _send(live_stack, daphne, spent, user, "hello")
    run = AgentRun.objects.get(pk=frames[-1]["run_id"])
    assert run.status == AgentRun.Status.SUCCEEDED
    assert run.prompt_tokens + run.completion_tokens >= 50

    fresh = conversation_create(owner=user, profile=profile)
    refused, pong = _send(live_stack, daphne, fresh, user, "more")
    assert refused["type"] == "error"
    assert refused["code"] == "quota_exceeded"
    assert "token allowance" in refused["message"]
    assert pong["type"] == "pong"  # the socket stayed open
    status, body = _post(live_stack, daphne, fresh, user, "more")
    assert status == 429
    assert body["code"] == "quota_exceeded"
    assert not Message.objects.filter(conversation=fresh).exists()

    # Another user's allowance is their own.
    theirs = conversation_create(owner=other_user, profile=profile)
    assert _send(live_stack, daphne, theirs, other_user, "hi")[-1]["type"] == "run.finished"


def test_sends_per_minute(live_stack, spawn_daphne, user, other_user):
    model = f"rate-{uuid.uuid4().hex[:8]}"
    live_stack.model.policy(model, lambda body: Reply("Final Answer: fine"))
    profile = live_stack.profile(model, tools=())
    daphne = _daphne(spawn_daphne, CHAT_SENDS_PER_MINUTE="2")
    # The counter is per clock minute: start well inside one.
    while time.time() % 60 > 50:
        time.sleep(0.5)

    conversations = [conversation_create(owner=user, profile=profile) for _ in range(4)]
    # Within the minute: accepted sends are not waited on past their message.created.
    for conversation in conversations[:2]:
        accepted = _send(live_stack, daphne, conversation, user, "hi", wait_for_run=False)
        assert accepted[-1]["type"] == "message.created"
    refused, pong = _send(live_stack, daphne, conversations[2], user, "one more")
    status, body = _post(live_stack, daphne, conversations[3], user, "and another")

    assert refused["type"] == "error"
    assert refused["code"] == "rate_limited"
    assert refused["message"] == "At most 2 messages a minute; try again soon."
    assert pong["type"] == "pong"
    assert status == 429
    assert body == {"code": "rate_limited", "message": refused["message"]}
    assert not Message.objects.filter(conversation__in=conversations[2:]).exists()
    theirs = conversation_create(owner=other_user, profile=profile)
    assert _send(live_stack, daphne, theirs, other_user, "hi")[-1]["type"] == "run.finished"
