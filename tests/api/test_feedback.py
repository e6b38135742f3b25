"""PUT/GET/DELETE /api/messages/<id>/feedback/: the owner's thumbs on one answer."""

from __future__ import annotations

import pytest
from django.test import Client

from agents.models import AnswerFeedback
from tests.answers import finished_answer

pytestmark = pytest.mark.django_db


@pytest.fixture
def answer(conversation):
    return finished_answer(conversation=conversation)


@pytest.fixture
def url(answer):
    return f"/api/messages/{answer.pk}/feedback/"


def put(client, url, body):
    return client.put(url, body, content_type="application/json")


def test_the_owner_rates_reads_changes_and_clears_feedback(client, user, url):
    client.force_login(user)
    assert client.get(url).status_code == 404
    response = put(client, url, {"rating": "up", "comment": "Clear and right."})
    assert response.status_code == 200
    assert response.json()["rating"] == "up"
    assert client.get(url).json()["comment"] == "Clear and right."
    put(client, url, {"rating": "down"})
    assert client.get(url).json() | {"updated_at": None} == {
        "message_id": int(url.split("/")[3]),
        "rating": "down",
        "comment": "",
        "updated_at": None,
    }
    assert client.delete(url).status_code == 204
    assert client.get(url).status_code == 404
    assert not AnswerFeedback.objects.exists()


def test_another_user_gets_404_and_changes_nothing(client, user, other_user, url, answer):
    AnswerFeedback.objects.create(message=answer, user=user, rating="up")
    client.force_login(other_user)
    assert client.get(url).status_code == 404
    assert put(client, url, {"rating": "down"}).status_code == 404
    assert client.delete(url).status_code == 404
    assert list(AnswerFeedback.objects.values_list("user__username", "rating")) == [("alice", "up")]


def test_an_anonymous_visitor_is_refused(url):
    assert Client().put(url, {"rating": "up"}, content_type="application/json").status_code == 403
    assert not AnswerFeedback.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "rating"),
        ({"rating": "sideways"}, "rating"),
        ({"rating": "up", "comment": "x" * 2001}, "comment"),
    ],
)
def test_bad_input_is_a_clear_400(client, user, url, body, field):
    client.force_login(user)
    response = put(client, url, body)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert field in response.json()["fields"]
    assert not AnswerFeedback.objects.exists()


def test_a_question_cannot_be_rated(client, user, answer):
    question = answer.run.trigger_message
    client.force_login(user)
    response = put(client, f"/api/messages/{question.pk}/feedback/", {"rating": "up"})
    assert response.status_code == 400
    assert response.json() == {
        "code": "not_rateable",
        "message": "Only an agent's answer takes feedback.",
    }
