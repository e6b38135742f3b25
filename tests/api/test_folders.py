"""The folders' and the bulk endpoint's JSON API: scoping, CSRF, bad input (issue 42)."""

from __future__ import annotations

import secrets

import pytest
from django.conf import settings
from django.test import Client

from agents.models import Conversation, ConversationFolder
from agents.services.conversations import conversation_create
from agents.services.folders import conversation_move, folder_create

pytestmark = pytest.mark.django_db

FOLDERS = "/api/folders/"
BULK = "/api/conversations/bulk/"


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def folder_url(folder) -> str:
    return f"/api/folders/{folder.pk}/"


def conversation_url(conversation) -> str:
    return f"/api/conversations/{conversation.pk}/"


def snapshot() -> tuple:
    return (
        list(Conversation.objects.order_by("pk").values_list("pk", "archived", "folder_id")),
        list(ConversationFolder.objects.order_by("pk").values_list("pk", "owner_id", "name")),
    )


def test_create_list_rename_and_delete_a_folder(api, user):
    created = api.post(FOLDERS, {"name": "Travel"}, content_type="application/json")
    assert created.status_code == 201
    folder = created.json()
    assert folder["name"] == "Travel"
    assert api.get(FOLDERS).json()["results"] == [folder]

    renamed = api.patch(
        f"{FOLDERS}{folder['id']}/", {"name": "Trips"}, content_type="application/json"
    )
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "Trips"

    conversation = conversation_create(owner=user, title="Lisbon")
    moved = api.patch(
        conversation_url(conversation), {"folder": folder["id"]}, content_type="application/json"
    )
    assert moved.json()["folder_id"] == folder["id"]
    listed = api.get("/api/conversations/").json()["results"]
    assert listed[0]["folder_id"] == folder["id"]

    assert api.delete(f"{FOLDERS}{folder['id']}/").status_code == 204
    assert api.get(FOLDERS).json()["results"] == []
    conversation.refresh_from_db()
    assert conversation.folder_id is None
    # Taken out with null, when it is in one.
    again = folder_create(owner=user, name="Again")
    conversation_move(conversation=conversation, folder=again)
    out = api.patch(
        conversation_url(conversation), {"folder": None}, content_type="application/json"
    )
    assert out.json()["folder_id"] is None


def test_another_users_folder_is_a_404_everywhere_and_changes_nothing(api, user, other_user):
    theirs = folder_create(owner=other_user, name="Bob's")
    their_conversation = conversation_create(owner=other_user, title="Bob's chat")
    conversation_move(conversation=their_conversation, folder=theirs)
    mine = conversation_create(owner=user, title="Mine")
    before = snapshot()
    assert api.get(FOLDERS).json()["results"] == []
    for response in (
        api.patch(folder_url(theirs), {"name": "Taken"}, content_type="application/json"),
        api.delete(folder_url(theirs)),
        api.patch(conversation_url(mine), {"folder": theirs.pk}, content_type="application/json"),
        api.patch(
            conversation_url(their_conversation), {"folder": None}, content_type="application/json"
        ),
    ):
        assert response.status_code == 404, response.content
        assert response.json()["code"] == "not_found"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"name": "   "}, 400, "empty"),
        ({"name": "x" * 81}, 400, "too_long"),
        ({}, 400, "invalid"),
        ({"name": ["a"]}, 400, "invalid"),
    ],
)
def test_a_bad_folder_name_gets_a_clear_error_and_nothing_is_lost(api, user, body, status, code):
    folder = folder_create(owner=user, name="Keep me")
    before = snapshot()
    for response in (
        api.post(FOLDERS, body, content_type="application/json"),
        api.patch(folder_url(folder), body, content_type="application/json"),
    ):
        assert response.status_code == status
        assert response.json()["code"] == code
        assert response.json()["message"]
    assert snapshot() == before


def test_a_taken_name_is_refused(api, user):
    folder_create(owner=user, name="Work")
    response = api.post(FOLDERS, {"name": "Work"}, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "code": "folder_name_taken",
        "message": "You already have a folder named “Work”.",
    }


def test_bulk_archive_unarchive_and_delete(api, user):
    a, b, c = (conversation_create(owner=user, title=t) for t in "abc")
    response = api.post(
        BULK, {"action": "archive", "ids": [b.pk, a.pk]}, content_type="application/json"
    )
    assert response.status_code == 200
    assert response.json() == {"action": "archive", "ids": sorted([a.pk, b.pk])}
    listed = [row["id"] for row in api.get("/api/conversations/").json()["results"]]
    assert listed == [c.pk]
    api.post(BULK, {"action": "unarchive", "ids": [a.pk, b.pk]}, content_type="application/json")
    assert not Conversation.objects.filter(archived=True).exists()
    deleted = api.post(
        BULK, {"action": "delete", "ids": [a.pk, c.pk]}, content_type="application/json"
    )
    assert deleted.json()["ids"] == sorted([a.pk, c.pk])
    assert list(Conversation.objects.values_list("pk", flat=True)) == [b.pk]


@pytest.mark.parametrize("action", ["archive", "unarchive", "delete"])
def test_bulk_naming_another_users_conversation_changes_nothing(api, user, other_user, action):
    mine = conversation_create(owner=user, title="mine")
    theirs = conversation_create(owner=other_user, title="theirs")
    before = snapshot()
    response = api.post(
        BULK, {"action": action, "ids": [mine.pk, theirs.pk]}, content_type="application/json"
    )
    assert response.status_code == 404
    body = response.json()
    assert body["code"] == "not_found"
    assert body["message"] == f"No such conversation: {theirs.pk}. Nothing was changed."
    assert snapshot() == before


@pytest.mark.parametrize(
    "body",
    [
        {"action": "archive", "ids": []},
        {"action": "archive"},
        {"action": "explode", "ids": [1]},
        {"action": "delete", "ids": ["one"]},
        {"action": "delete", "ids": [0]},
        {"action": "delete", "ids": list(range(1, 202))},
    ],
)
def test_bulk_bad_input_is_a_clear_error_and_nothing_is_lost(api, user, body):
    conversation_create(owner=user, title="kept")
    before = snapshot()
    response = api.post(BULK, body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert response.json()["fields"]
    assert snapshot() == before


def test_the_changing_endpoints_need_the_csrf_token(user):
    folder = folder_create(owner=user, name="Work")
    conversation = conversation_create(owner=user, title="x")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    requests = [
        ("post", FOLDERS, {"name": "New"}),
        ("patch", folder_url(folder), {"name": "Renamed"}),
        ("patch", conversation_url(conversation), {"folder": folder.pk}),
        ("delete", folder_url(folder), None),
        ("post", BULK, {"action": "delete", "ids": [conversation.pk]}),
    ]
    before = snapshot()
    for method, path, body in requests:
        response = getattr(browser, method)(path, body, content_type="application/json")
        assert response.status_code == 403, path
        assert "CSRF" in response.json()["message"]
    assert snapshot() == before

    token = secrets.token_hex(16)
    browser.cookies[settings.CSRF_COOKIE_NAME] = token
    for method, path, body in requests:
        response = getattr(browser, method)(
            path, body, content_type="application/json", HTTP_X_CSRFTOKEN=token
        )
        assert response.status_code in (200, 201, 204), (path, response.content)
    assert not Conversation.objects.exists()


def test_anonymous_visitors_are_refused(client, user):
    folder = folder_create(owner=user, name="Work")
    for response in (
        client.get(FOLDERS),
        client.post(FOLDERS, {"name": "x"}, content_type="application/json"),
        client.delete(folder_url(folder)),
        client.post(BULK, {"action": "delete", "ids": [1]}, content_type="application/json"),
    ):
        assert response.status_code == 403
    assert ConversationFolder.objects.count() == 1
