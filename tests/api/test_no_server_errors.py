"""Requests that crashed the API with a 500 (issue 37, N6): each gets a 4xx that says why."""

from __future__ import annotations

import pytest

from agents.services.conversations import message_send
from tests.api.endpoints import endpoints

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, user):
    client.force_login(user)
    client.raise_request_exception = False  # a crash must show as the 500 a user would get
    return client


def test_options_on_every_api_route_describes_it(api, user, conversation):
    sent = message_send(conversation=conversation, user=user, content="hi", client_id="o1")
    routes = {
        endpoint.path
        for endpoint in endpoints(
            conversation_id=conversation.pk, message_id=sent.message.pk, run_id=sent.run.pk
        )
    }
    routes |= {f"/api/runs/{sent.run.pk}/continue/", "/api/approvals/1/decide/"}

    for path in sorted(routes):
        response = api.options(path)
        assert response.status_code < 500, path
        if response.status_code == 200:
            described = response.json()
            assert "OPTIONS" in described["allowed_methods"], path
            assert "actions" not in described, path


def test_a_nul_byte_in_the_search_is_a_clear_400(api):
    response = api.get("/api/conversations/", {"q": "ab\x00cd"})

    assert response.status_code == 400
    assert response.json()["message"] == "The search text cannot contain a NUL character."


def test_a_nul_byte_in_a_share_link_is_a_404(api, settings):
    # The 404 page is a template with static files: no manifest in tests.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    response = api.get("/s/%00/")

    assert response.status_code == 404
