"""A key's runs are its owner's sends: the owner's daily token quota, sends a minute and
profile groups refuse them as they refuse the chat's, and nothing is written. In process (no
worker): each refusal comes before a run would start. Committed data (transaction=True): the
views run on a pool thread, with a database connection of its own."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from agents.models import AgentProfile, AgentRun, Conversation
from agents.services.api_keys import api_key_create
from agents.services.conversations import conversation_create, message_send
from tests.api.test_turns import finish
from tests.usage import spend

pytestmark = pytest.mark.django_db(transaction=True)

JSON = "application/json"


@pytest.fixture
def key_client(client, user):
    secret = api_key_create(owner=user, name="limits", scopes=["read", "chat"]).secret
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
    client.raise_request_exception = False
    return client


@pytest.fixture
def profile(db):
    return AgentProfile.objects.create(name="Limits", slug="limits")


def _ask(client, model: str, content: str = "What is 2 + 2?"):
    body = {"model": model, "messages": [{"role": "user", "content": content}]}
    return client.post("/v1/chat/completions", body, content_type=JSON)


def test_the_owners_daily_quota_refuses_a_keys_run(key_client, user, profile, settings):
    settings.CHAT_DAILY_TOKEN_QUOTA = 50
    spent = conversation_create(owner=user, profile=profile)
    run = message_send(conversation=spent, user=user, content="earlier").run
    spend(run, prompt_tokens=40, completion_tokens=10)
    finish(run)

    response = _ask(key_client, profile.slug)

    assert response.status_code == 429
    assert response.json()["code"] == "quota_exceeded"
    assert AgentRun.objects.count() == 1
    assert Conversation.objects.count() == 1  # no empty conversation left behind


def test_the_owners_sends_a_minute_count_the_keys_runs_too(key_client, user, profile, settings):
    settings.CHAT_SENDS_PER_MINUTE = 1
    message_send(conversation=conversation_create(owner=user), user=user, content="from the page")

    response = _ask(key_client, profile.slug)

    assert response.status_code == 429
    assert response.json()["code"] == "rate_limited"


def test_a_profile_of_a_group_the_owner_is_not_in_is_neither_listed_nor_usable(key_client, profile):
    profile.allowed_groups.add(Group.objects.create(name="finance"))

    listed = key_client.get("/v1/models").json()["data"]
    response = _ask(key_client, profile.slug)

    assert profile.slug not in [model["id"] for model in listed]
    assert response.status_code == 400
    assert response.json()["code"] == "profile_not_allowed"
    assert not AgentRun.objects.exists()


def test_bad_questions_are_clear_400s(key_client, profile):
    empty = _ask(key_client, profile.slug, content="   ")
    an_image = key_client.post(
        "/v1/chat/completions",
        {
            "model": profile.slug,
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
        },
        content_type=JSON,
    )
    last_not_the_user = key_client.post(
        "/v1/chat/completions",
        {"model": profile.slug, "messages": [{"role": "system", "content": "Be brief."}]},
        content_type=JSON,
    )

    assert (empty.status_code, empty.json()["code"]) == (400, "empty")
    assert (an_image.status_code, an_image.json()["code"]) == (400, "invalid_field")
    assert last_not_the_user.status_code == 400
    assert not AgentRun.objects.exists()
    assert not Conversation.objects.exists()
