"""The tree over HTTP: switching branches (owner only, with clear refusals), the active
branch in the conversation's messages and export, every branch on request, and sends that
name the message they follow."""

from __future__ import annotations

import json

import pytest

from agents.models import AgentRun, Conversation, Message
from agents.react.types import FinalAnswerStep
from agents.runs.store import run_finish
from agents.services.conversations import message_send, run_regenerate

pytestmark = pytest.mark.django_db

JSON = "application/json"


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def finish(run: AgentRun, text: str) -> Message:
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.RUNNING)
    run.refresh_from_db()
    answer = run_finish(run=run, step=FinalAnswerStep(text=text))
    assert answer is not None
    return answer


@pytest.fixture
def three_answers(user, conversation) -> tuple[Message, list[Message]]:
    """One question answered, then regenerated twice: three sibling answers."""
    sent = message_send(conversation=conversation, user=user, content="A colour?")
    answers = [finish(sent.run, "red")]
    for text in ("blue", "green"):
        answers.append(finish(run_regenerate(conversation=conversation, user=user), text))
    return sent.message, answers


def branch_url(conversation_id: int) -> str:
    return f"/api/conversations/{conversation_id}/branch/"


def test_switch_to_an_earlier_answer(api, conversation, three_answers):
    question, (red, _blue, _green) = three_answers

    response = api.post(branch_url(conversation.pk), {"message_id": red.pk}, content_type=JSON)

    assert response.status_code == 200
    assert response.json() == {
        "active_leaf_id": red.pk,
        "branch": [question.pk, red.pk],
        "summary": None,
    }
    conversation.refresh_from_db()
    assert conversation.active_leaf_id == red.pk
    body = api.get(f"/api/conversations/{conversation.pk}/").json()
    assert body["active_leaf_id"] == red.pk
    assert [m["content"] for m in body["messages"]] == ["A colour?", "red"]


def test_every_branch_on_request(api, conversation, three_answers):
    question, _answers = three_answers
    body = api.get(f"/api/conversations/{conversation.pk}/?branches=all").json()
    assert [(m["content"], m["parent_id"], m["on_active_branch"]) for m in body["messages"]] == [
        ("A colour?", None, True),
        ("red", question.pk, False),
        ("blue", question.pk, False),
        ("green", question.pk, True),
    ]
    # The log keeps every branch: each run's frames are there.
    finished = [e for e in body["events"] if e["type"] == "run.finished"]
    assert [e["message"]["content"] for e in finished] == ["red", "blue", "green"]


def test_export_shows_the_active_branch_or_every_branch(api, conversation, three_answers):
    url = f"/api/conversations/{conversation.pk}/export/"
    active = json.loads(api.get(url + "?format=json").content)
    assert [m["content"] for m in active["messages"]] == ["A colour?", "green"]
    assert active["branches"] == "active"

    everything = json.loads(api.get(url + "?format=json&branches=all").content)
    assert [m["content"] for m in everything["messages"]] == ["A colour?", "red", "blue", "green"]
    markdown = api.get(url + "?branches=all").content.decode()
    assert "red" in markdown
    assert "another branch" in markdown
    assert "red" not in api.get(url).content.decode()


def test_switching_another_users_conversation_is_a_404(
    api, other_user, other_conversation, three_answers
):
    theirs = message_send(conversation=other_conversation, user=other_user, content="mine").message
    response = api.post(
        branch_url(other_conversation.pk), {"message_id": theirs.pk}, content_type=JSON
    )
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_switching_to_another_users_message_is_a_404(
    api, conversation, other_user, other_conversation, three_answers
):
    theirs = message_send(conversation=other_conversation, user=other_user, content="mine").message
    before = Conversation.objects.get(pk=conversation.pk).active_leaf_id

    response = api.post(branch_url(conversation.pk), {"message_id": theirs.pk}, content_type=JSON)

    assert response.status_code == 404
    assert response.json() == {
        "code": "not_found",
        "message": f"Message {theirs.pk} is not in this conversation.",
    }
    assert Conversation.objects.get(pk=conversation.pk).active_leaf_id == before


@pytest.mark.parametrize("body", [{}, {"message_id": "red"}, {"message_id": 0}, {"x": 1}])
def test_a_switch_without_a_message_id_is_invalid(api, conversation, three_answers, body):
    before = Conversation.objects.get(pk=conversation.pk).active_leaf_id
    response = api.post(branch_url(conversation.pk), body, content_type=JSON)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert "message_id" in response.json()["fields"]
    assert Conversation.objects.get(pk=conversation.pk).active_leaf_id == before


def test_a_send_names_the_message_it_follows(api, conversation, three_answers):
    _question, (red, _, _green) = three_answers
    response = api.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"content": "Why that one?", "parent_id": red.pk},
        content_type=JSON,
    )
    assert response.status_code == 201
    assert response.json()["message"]["parent_id"] == red.pk
    body = api.get(f"/api/conversations/{conversation.pk}/").json()
    assert [m["content"] for m in body["messages"]] == ["A colour?", "red", "Why that one?"]


def test_a_send_following_a_message_elsewhere_is_refused(
    api, conversation, other_user, other_conversation
):
    theirs = message_send(conversation=other_conversation, user=other_user, content="mine").message
    response = api.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"content": "hi", "parent_id": theirs.pk},
        content_type=JSON,
    )
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert not Message.objects.filter(conversation=conversation).exists()


def test_the_chat_page_carries_the_tree_and_offers_every_version(
    api, conversation, three_answers, settings
):
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    question, (red, blue, green) = three_answers
    response = api.get(f"/c/{conversation.pk}/")

    tree = response.context["state"]["tree"]
    assert tree["active_leaf_id"] == green.pk
    assert tree["messages"] == [
        [question.pk, None, "user", None],
        *([answer.pk, question.pk, "assistant", answer.run_id] for answer in (red, blue, green)),
    ]
    assert tree["run_triggers"] == {answer.run_id: question.pk for answer in (red, blue, green)}
    export_all = f"/api/conversations/{conversation.pk}/export/?format=json&amp;branches=all"
    assert export_all in response.content.decode()
