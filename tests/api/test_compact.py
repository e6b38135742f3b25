"""Summarise now over HTTP: `POST /api/conversations/<id>/compact/` (the `/compact` command)."""

from __future__ import annotations

import pytest

from agents.models import AgentRun, MemorySummary, Message
from agents.services.branches import branch_activate
from agents.services.conversations import conversation_create, message_send
from chatsite.celery import app as celery_app
from tests.usage import spend

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def compact_url(conversation_id: int) -> str:
    return f"/api/conversations/{conversation_id}/compact/"


def finished_turn(conversation, user, question: str, answer: str) -> None:
    sent = message_send(conversation=conversation, user=user, content=question)
    AgentRun.objects.filter(pk=sent.run.pk).update(status=AgentRun.Status.SUCCEEDED)
    answered = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content=answer,
        run=sent.run,
        parent=sent.message,
    )
    branch_activate(conversation=conversation, leaf_id=answered.pk)


def test_compact_folds_the_finished_turns_into_a_stored_summary(
    api, user, conversation, monkeypatch, django_capture_on_commit_callbacks
):
    # Eager: the summariser runs in this process, against the offline demo model.
    monkeypatch.setattr(celery_app.conf, "task_always_eager", True)
    finished_turn(conversation, user, "Please remember that my cat is called Miso.", "Noted.")
    finished_turn(conversation, user, "What is 2+2?", "4")

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(compact_url(conversation.pk))

    assert response.status_code == 202
    assert response.json()["queued"] is True
    summary = MemorySummary.objects.get(conversation=conversation)
    assert summary.covers_through == conversation.messages.order_by("id").last()
    assert summary.text.strip()


def test_compact_with_nothing_finished_says_so_and_stores_nothing(api, user, conversation):
    response = api.post(compact_url(conversation.pk))

    assert response.status_code == 200
    assert response.json() == {"queued": False, "message": "Nothing to summarise yet."}
    assert not MemorySummary.objects.filter(conversation=conversation).exists()


def test_compact_of_another_users_conversation_is_a_404(api, other_conversation):
    response = api.post(compact_url(other_conversation.pk))

    assert response.status_code == 404
    assert not MemorySummary.objects.exists()


def test_a_second_compact_while_one_is_pending_queues_nothing_more(
    api, user, conversation, django_capture_on_commit_callbacks
):
    finished_turn(conversation, user, "Remember the number 7.", "Noted.")

    with django_capture_on_commit_callbacks() as callbacks:
        first = api.post(compact_url(conversation.pk))
        again = api.post(compact_url(conversation.pk))

    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json() == {
        "queued": True,
        "message": "A summary of this conversation is on its way.",
    }
    assert len(callbacks) == 1  # one summarising task, not two


def test_compact_is_rate_limited_per_user(
    api, user, settings, minute_turn_clock, django_capture_on_commit_callbacks
):
    # Started 0.5 s before a minute turns; the refused request lands after the turn.
    settings.CHAT_COMPACTS_PER_MINUTE = 2
    conversations = [conversation_create(owner=user) for _ in range(3)]
    for conversation in conversations:
        finished_turn(conversation, user, "Remember the number 7.", "Noted.")
    statuses = []
    with django_capture_on_commit_callbacks() as callbacks:
        for conversation in conversations:
            statuses.append(api.post(compact_url(conversation.pk)).status_code)
            minute_turn_clock.advance(0.3)

    assert statuses == [202, 202, 429]
    assert len(callbacks) == 2


def test_compact_over_a_used_up_monthly_budget_is_429_and_queues_nothing(
    api, user, other_user, conversation, django_capture_on_commit_callbacks
):
    from agents.models import UsageBudget

    finished_turn(conversation, user, "Remember the number 7.", "Noted.")
    UsageBudget.objects.create(user=user, monthly_tokens=40)
    spend(conversation.runs.get(), prompt_tokens=40, completion_tokens=0)

    with django_capture_on_commit_callbacks() as callbacks:
        response = api.post(compact_url(conversation.pk))

    assert response.status_code == 429
    assert response.json()["code"] == "monthly_budget_reached"
    assert callbacks == []


def test_another_users_used_up_budget_never_refuses_a_compact(
    api, user, other_user, conversation, django_capture_on_commit_callbacks
):
    from agents.models import UsageBudget

    finished_turn(conversation, user, "Remember the number 7.", "Noted.")
    UsageBudget.objects.create(user=other_user, monthly_tokens=1)
    theirs = conversation_create(owner=other_user)
    finished_turn(theirs, other_user, "Spend it.", "Spent.")
    spend(theirs.runs.get(), prompt_tokens=5, completion_tokens=0)

    with django_capture_on_commit_callbacks() as callbacks:
        response = api.post(compact_url(conversation.pk))

    assert response.status_code == 202
    assert len(callbacks) == 1


def test_compact_over_the_daily_quota_is_429_and_queues_nothing(
    api, user, conversation, settings, django_capture_on_commit_callbacks
):
    settings.CHAT_DAILY_TOKEN_QUOTA = 50
    finished_turn(conversation, user, "Remember the number 7.", "Noted.")
    spend(conversation.runs.get(), prompt_tokens=40, completion_tokens=10)

    with django_capture_on_commit_callbacks() as callbacks:
        response = api.post(compact_url(conversation.pk))

    assert response.status_code == 429
    assert response.json()["code"] == "quota_exceeded"
    assert callbacks == []
