"""/api/conversations/<id>/share/: the owner creates, reads and revokes a read-only link."""

from __future__ import annotations

import pytest
from django.test import Client

from agents.models import ConversationShare

pytestmark = pytest.mark.django_db


@pytest.fixture
def url(conversation):
    return f"/api/conversations/{conversation.pk}/share/"


def test_the_owner_creates_reads_and_revokes_the_link(client, user, url):
    client.force_login(user)
    assert client.get(url).json() == {"share": None}
    created = client.post(url)
    assert created.status_code == 201
    share = created.json()["share"]
    assert share["url"] == f"http://testserver/s/{share['token']}/"
    assert len(share["token"]) >= 40
    # Asking again hands back the same link: the one already given out keeps working.
    again = client.post(url)
    assert again.status_code == 200
    assert again.json()["share"]["token"] == share["token"]
    assert client.get(url).json()["share"]["token"] == share["token"]

    assert client.delete(url).status_code == 204
    assert client.get(url).json() == {"share": None}
    assert ConversationShare.objects.get().revoked_at is not None
    # A new link after a revoke is a new token; the old one stays closed.
    renewed = client.post(url).json()["share"]
    assert renewed["token"] != share["token"]


def test_another_user_gets_404_and_changes_nothing(client, other_user, url, conversation):
    ConversationShare.objects.create(conversation=conversation)
    client.force_login(other_user)
    for method in ("get", "post", "delete"):
        response = getattr(client, method)(url)
        assert response.status_code == 404, method
        assert response.json()["code"] == "not_found"
    share = ConversationShare.objects.get()
    assert share.revoked_at is None


def test_an_anonymous_visitor_is_refused(url):
    assert Client().post(url).status_code == 403
    assert not ConversationShare.objects.exists()


def test_a_missing_conversation_is_a_404(client, user):
    client.force_login(user)
    assert client.post("/api/conversations/999999/share/").status_code == 404
