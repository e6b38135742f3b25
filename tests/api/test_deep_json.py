"""A JSON body nested too deeply is a clear 400, never a 500, and changes nothing."""

from __future__ import annotations

import json

import pytest

from agents.models import Conversation, Message
from agents.services.conversations import conversation_create

pytestmark = pytest.mark.django_db

JSON = "application/json"


@pytest.fixture
def api(client, user):
    client.force_login(user)
    client.raise_request_exception = False  # a crash must show as the 500 a user would get
    return client


def _nested(depth: int) -> str:
    return json.dumps({"title": "x", "content": "hi", "client_id": "c1", "extra": None})[:-5] + (
        "[" * depth + "]" * depth + "}"
    )


@pytest.mark.parametrize(
    "body", ["[" * 50_000, _nested(50_000), _nested(40)], ids=["bare", "inside", "just-over"]
)
def test_a_deeply_nested_body_is_a_400_that_says_why(api, user, body):
    conversation = conversation_create(owner=user, title="kept")
    calls = [
        ("post", "/api/conversations/"),
        ("patch", f"/api/conversations/{conversation.pk}/"),
        ("post", f"/api/conversations/{conversation.pk}/messages/"),
    ]
    for method, path in calls:
        response = getattr(api, method)(path, body, content_type=JSON)
        assert response.status_code == 400, (method, path, response.status_code)
        assert response.json() == {
            "code": "json_too_deep",
            "message": "The request body is JSON nested deeper than 32 levels.",
        }
    assert Conversation.objects.filter(owner=user).count() == 1
    conversation.refresh_from_db()
    assert conversation.title == "kept"
    assert not Message.objects.filter(conversation=conversation).exists()


def test_nesting_within_the_limit_still_reaches_the_view(api, user):
    conversation = conversation_create(owner=user, title="old")
    response = api.patch(
        f"/api/conversations/{conversation.pk}/",
        json.dumps({"title": "new", "ignored": [[[[{"a": [1]}]]]]}),
        content_type=JSON,
    )
    assert response.status_code == 200
    assert response.json()["title"] == "new"


def test_invalid_json_is_still_a_400(api):
    response = api.post("/api/conversations/", "{nope", content_type=JSON)
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    response = api.post("/api/conversations/", '{"title": NaN}', content_type=JSON)
    assert response.status_code == 400
