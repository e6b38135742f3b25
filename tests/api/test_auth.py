"""Login is required on every endpoint, and CSRF on every one that changes something."""

from __future__ import annotations

import secrets

import pytest
from django.conf import settings
from django.test import Client

from agents.models import AgentRun, Conversation, Message
from agents.services.conversations import message_send
from tests.api.endpoints import endpoints

pytestmark = pytest.mark.django_db


@pytest.fixture
def all_endpoints(user, conversation):
    sent = message_send(conversation=conversation, user=user, content="hi", client_id="h")
    return endpoints(
        conversation_id=conversation.pk, message_id=sent.message.pk, run_id=sent.run.pk
    )


def snapshot() -> tuple:
    return (
        list(Conversation.objects.values_list("pk", "title", "archived", "last_seq")),
        list(Message.objects.values_list("pk", "content")),
        list(AgentRun.objects.values_list("pk", "status", "cancel_requested_at")),
    )


def test_every_endpoint_refuses_an_anonymous_visitor(all_endpoints):
    before = snapshot()
    anonymous = Client()
    for endpoint in all_endpoints:
        response = endpoint.call(anonymous)
        assert response.status_code == 403, endpoint
        assert response.json()["code"] == "not_authenticated", endpoint
    assert snapshot() == before


def test_every_state_changing_endpoint_needs_the_csrf_token(user, all_endpoints):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    before = snapshot()
    changing = [endpoint for endpoint in all_endpoints if endpoint.changes_state]
    assert len(changing) == 14
    for endpoint in changing:
        response = endpoint.call(browser)
        assert response.status_code == 403, endpoint
        body = response.json()
        assert body["code"] == "permission_denied", endpoint
        assert "CSRF" in body["message"], endpoint
    assert snapshot() == before


def test_with_the_csrf_token_the_same_requests_go_through(user, conversation, all_endpoints):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    token = secrets.token_hex(16)
    browser.cookies[settings.CSRF_COOKIE_NAME] = token
    # The run must be over for regenerate and edit to be accepted.
    AgentRun.objects.update(status=AgentRun.Status.SUCCEEDED)
    # Deleting last, so the others still find the conversation.
    for endpoint in sorted(all_endpoints, key=lambda endpoint: endpoint.method == "DELETE"):
        response = endpoint.call(browser, HTTP_X_CSRFTOKEN=token)
        assert response.status_code in (200, 201, 202, 204, 400), (endpoint, response.content)
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_reads_need_no_csrf_token(user, all_endpoints):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    for endpoint in all_endpoints:
        if not endpoint.changes_state:
            assert endpoint.call(browser).status_code == 200, endpoint
