"""Sending, regenerating, editing and cancelling over HTTP: same services as the socket."""

from __future__ import annotations

import pytest

from agents.models import AgentRun, Message, RunEvent
from agents.services.conversations import conversation_create, message_send
from tests.usage import spend

pytestmark = pytest.mark.django_db

JSON = "application/json"


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def messages_url(conversation_id: int) -> str:
    return f"/api/conversations/{conversation_id}/messages/"


def finish(run: AgentRun) -> None:
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.SUCCEEDED)


# ---- send ------------------------------------------------------------------------------------


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_send_stores_the_message_a_queued_run_and_message_created(api, conversation):
    response = api.post(
        messages_url(conversation.pk), {"content": "Hi there", "client_id": "c1"}, content_type=JSON
    )
    assert response.status_code == 201
    body = response.json()
    assert body["created"] is True
    message = Message.objects.get(pk=body["message"]["id"])
    assert (message.conversation_id, message.content, message.client_id) == (
        conversation.pk,
        "Hi there",
        "c1",
    )
    run = AgentRun.objects.get(pk=body["run"]["id"])
    assert run.status == AgentRun.Status.QUEUED == body["run"]["status"]
    assert run.trigger_message == message
    event = RunEvent.objects.get(conversation=conversation)
    assert (event.seq, event.type, event.run_id) == (1, "message.created", run.pk)


def test_repeating_a_client_id_returns_the_original(api, conversation):
    first = api.post(
        messages_url(conversation.pk), {"content": "once", "client_id": "dup"}, content_type=JSON
    ).json()
    again = api.post(
        messages_url(conversation.pk), {"content": "once", "client_id": "dup"}, content_type=JSON
    )
    assert again.status_code == 200
    assert again.json()["created"] is False
    assert again.json()["message"]["id"] == first["message"]["id"]
    assert again.json()["run"]["id"] == first["run"]["id"]
    assert Message.objects.count() == 1
    assert RunEvent.objects.count() == 1


def test_send_without_client_id(api, conversation):
    response = api.post(messages_url(conversation.pk), {"content": "plain"}, content_type=JSON)
    assert response.status_code == 201
    assert response.json()["message"]["client_id"] is None


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        ({}, 400, "invalid"),
        ({"content": ["a"]}, 400, "invalid"),
        ({"content": "hi", "client_id": "x" * 65}, 400, "invalid"),
        ({"content": ""}, 400, "empty"),
        ({"content": "   \n"}, 400, "empty"),
        ({"content": "x" * 16001}, 400, "too_long"),
        ({"content": "hi", "profile": "nobody-has-this"}, 400, "profile_not_allowed"),
    ],
)
def test_bad_sends_are_refused_with_a_code_and_write_nothing(
    api, conversation, settings, payload, status, code
):
    settings.CHAT_MAX_MESSAGE_CHARS = 16000
    response = api.post(messages_url(conversation.pk), payload, content_type=JSON)
    assert response.status_code == status
    body = response.json()
    assert body["code"] == code
    assert body["message"]
    assert not Message.objects.exists()
    assert not AgentRun.objects.exists()


def test_send_while_a_run_is_in_progress(api, user, conversation):
    message_send(conversation=conversation, user=user, content="first", client_id="1")
    response = api.post(messages_url(conversation.pk), {"content": "second"}, content_type=JSON)
    assert response.status_code == 400
    assert response.json()["code"] == "run_in_progress"
    assert Message.objects.count() == 1


def test_rate_limit_is_429(api, user, settings, minute_turn_clock):
    # Started 0.5 s before a minute turns; the third send lands after the turn.
    settings.CHAT_SENDS_PER_MINUTE = 2
    conversations = [conversation_create(owner=user) for _ in range(3)]
    statuses = []
    for conversation in conversations:
        statuses.append(
            api.post(messages_url(conversation.pk), {"content": "hi"}, content_type=JSON)
        )
        minute_turn_clock.advance(0.3)
    assert [r.status_code for r in statuses] == [201, 201, 429]
    assert statuses[2].json() == {
        "code": "rate_limited",
        "message": "At most 2 messages a minute; try again soon.",
    }
    assert not conversations[2].messages.exists()


def test_daily_quota_is_429(api, user, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 50
    spent = conversation_create(owner=user)
    run = message_send(conversation=spent, user=user, content="earlier").run
    spend(run, prompt_tokens=40, completion_tokens=10)
    finish(run)
    fresh = conversation_create(owner=user)
    response = api.post(messages_url(fresh.pk), {"content": "more"}, content_type=JSON)
    assert response.status_code == 429
    assert response.json() == {
        "code": "quota_exceeded",
        "message": "You have used today's token allowance.",
    }


# ---- regenerate, edit, cancel ----------------------------------------------------------------


def test_regenerate_queues_a_new_run_for_the_last_message(api, user, conversation):
    sent = message_send(conversation=conversation, user=user, content="again?", client_id="a")
    finish(sent.run)
    response = api.post(f"/api/conversations/{conversation.pk}/regenerate/")
    assert response.status_code == 201
    run = AgentRun.objects.get(pk=response.json()["run"]["id"])
    assert run.pk != sent.run.pk
    assert run.trigger_message == sent.message
    assert run.status == AgentRun.Status.QUEUED


def test_regenerate_with_nothing_to_answer(api, conversation):
    response = api.post(f"/api/conversations/{conversation.pk}/regenerate/")
    assert response.status_code == 400
    assert response.json()["code"] == "nothing_to_regenerate"


def test_edit_sends_a_new_message_and_keeps_the_original(api, user, conversation):
    sent = message_send(conversation=conversation, user=user, content="teh question")
    finish(sent.run)
    response = api.post(
        f"/api/messages/{sent.message.pk}/edit/",
        {"content": "the question", "client_id": "e1"},
        content_type=JSON,
    )
    assert response.status_code == 201
    body = response.json()
    assert body["message"]["content"] == "the question"
    assert body["run"]["trigger_message_id"] == body["message"]["id"]
    assert list(conversation.messages.values_list("content", flat=True)) == [
        "teh question",
        "the question",
    ]
    created = RunEvent.objects.filter(type="message.created").order_by("seq").last()
    assert created.payload["message"]["edited_from"] == sent.message.pk


def test_edit_refusals(api, user, conversation):
    sent = message_send(conversation=conversation, user=user, content="q")
    finish(sent.run)
    answer = Message.objects.create(conversation=conversation, role="assistant", content="a")
    not_editable = api.post(f"/api/messages/{answer.pk}/edit/", {"content": "x"}, content_type=JSON)
    assert (not_editable.status_code, not_editable.json()["code"]) == (400, "not_editable")
    empty = api.post(f"/api/messages/{sent.message.pk}/edit/", {"content": " "}, content_type=JSON)
    assert (empty.status_code, empty.json()["code"]) == (400, "empty")
    missing = api.post("/api/messages/999999/edit/", {"content": "x"}, content_type=JSON)
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    assert conversation.messages.count() == 2


def test_cancel_a_queued_run(api, user, conversation):
    sent = message_send(conversation=conversation, user=user, content="stop me")
    response = api.post(f"/api/runs/{sent.run.pk}/cancel/")
    assert response.status_code == 200
    assert response.json()["run"]["status"] == "cancelled"
    sent.run.refresh_from_db()
    assert sent.run.status == AgentRun.Status.CANCELLED
    assert RunEvent.objects.filter(run=sent.run, type="run.cancelled").count() == 1


def test_cancel_a_running_run_asks_the_worker_to_stop(api, user, conversation):
    sent = message_send(conversation=conversation, user=user, content="stop me")
    AgentRun.objects.filter(pk=sent.run.pk).update(status=AgentRun.Status.RUNNING)
    response = api.post(f"/api/runs/{sent.run.pk}/cancel/")
    assert response.status_code == 200
    sent.run.refresh_from_db()
    assert sent.run.status == AgentRun.Status.RUNNING
    assert sent.run.cancel_requested_at is not None


def test_cancel_a_finished_run_changes_nothing(api, user, conversation):
    sent = message_send(conversation=conversation, user=user, content="done")
    finish(sent.run)
    response = api.post(f"/api/runs/{sent.run.pk}/cancel/")
    assert response.status_code == 200
    assert response.json()["run"]["status"] == "succeeded"


def test_cancel_a_missing_run(api):
    response = api.post("/api/runs/999999/cancel/")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": "No such run."}
