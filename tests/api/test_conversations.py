"""/api/conversations/: list, search, pagination, create, fetch, rename, archive, delete."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from agents.models import AgentProfile, Conversation, Message
from agents.services.conversations import conversation_create, message_send

pytestmark = pytest.mark.django_db

LIST = "/api/conversations/"
JSON = "application/json"


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def item(conversation_id: int) -> str:
    return f"/api/conversations/{conversation_id}/"


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_list_shows_only_my_conversations_newest_first(api, user, other_user):
    older = conversation_create(owner=user, title="older")
    newer = conversation_create(owner=user, title="newer")
    conversation_create(owner=other_user, title="not mine")
    body = api.get(LIST).json()
    assert body["count"] == 2
    assert [row["id"] for row in body["results"]] == [newer.pk, older.pk]
    assert set(body["results"][0]) == {
        "id",
        "title",
        "profile",
        "archived",
        "pinned",
        "pinned_at",
        "folder_id",
        "has_active_run",
        "snippet",
        "last_seq",
        "active_leaf_id",
        "created_at",
        "updated_at",
    }


def test_a_new_message_moves_a_conversation_to_the_top(api, user):
    older = conversation_create(owner=user, title="older")
    conversation_create(owner=user, title="newer")
    message_send(conversation=older, user=user, content="bump", client_id="b")
    assert api.get(LIST).json()["results"][0]["id"] == older.pk


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_search_matches_titles_and_message_text(api, user, other_user):
    by_title = conversation_create(owner=user, title="Trip to Lisbon")
    by_content = conversation_create(owner=user, title="Misc")
    message_send(conversation=by_content, user=user, content="flights to LISBON?", client_id="a")
    conversation_create(owner=user, title="Groceries")
    theirs = conversation_create(owner=other_user, title="Lisbon too")
    found = {row["id"] for row in api.get(LIST, {"q": "lisbon"}).json()["results"]}
    assert found == {by_title.pk, by_content.pk}
    assert theirs.pk not in found


def test_archived_conversations_are_listed_apart(api, user):
    live = conversation_create(owner=user, title="live")
    archived = conversation_create(owner=user, title="old")
    Conversation.objects.filter(pk=archived.pk).update(archived=True)
    assert [row["id"] for row in api.get(LIST).json()["results"]] == [live.pk]
    archived_ids = [row["id"] for row in api.get(LIST, {"archived": "1"}).json()["results"]]
    assert archived_ids == [archived.pk]


def test_pagination(api, user):
    ids = [conversation_create(owner=user, title=f"c{n}").pk for n in range(7)]
    first = api.get(LIST, {"page_size": 3}).json()
    assert first["count"] == 7
    assert [row["id"] for row in first["results"]] == ids[::-1][:3]
    assert first["previous"] is None
    second = api.get(first["next"]).json()
    assert [row["id"] for row in second["results"]] == ids[::-1][3:6]
    last = api.get(LIST, {"page_size": 3, "page": 3}).json()
    assert [row["id"] for row in last["results"]] == ids[:1]
    assert last["next"] is None
    beyond = api.get(LIST, {"page_size": 3, "page": 4})
    assert beyond.status_code == 404
    assert beyond.json()["code"] == "not_found"


def test_create(api, user):
    response = api.post(LIST, {"title": "  Plans  "}, content_type=JSON)
    assert response.status_code == 201
    body = response.json()
    conversation = Conversation.objects.get(pk=body["id"])
    assert conversation.owner == user
    assert body["title"] == conversation.title == "Plans"
    assert body["last_seq"] == 0


def test_create_without_a_body(api, user):
    response = api.post(LIST)
    assert response.status_code == 201
    assert Conversation.objects.get(pk=response.json()["id"]).title == ""


def test_create_with_a_profile(api, user):
    profile = AgentProfile.objects.get(is_default=True)
    response = api.post(LIST, {"profile": profile.slug}, content_type=JSON)
    assert response.status_code == 201
    assert response.json()["profile"] == profile.slug


def test_create_with_a_profile_i_may_not_use(api, user):
    staff_only = AgentProfile.objects.create(name="Staff", slug="staff")
    staff_only.allowed_groups.add(Group.objects.create(name="staff"))
    for slug in ("staff", "no-such-profile"):
        response = api.post(LIST, {"profile": slug}, content_type=JSON)
        assert response.status_code == 400
        assert response.json() == {
            "code": "profile_not_allowed",
            "message": "That agent is not available to you.",
        }
    assert not Conversation.objects.exists()


def test_create_rejects_a_title_too_long(api):
    response = api.post(LIST, {"title": "x" * 201}, content_type=JSON)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert "title" in body["fields"]


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_get_includes_messages_and_stored_events(api, user, conversation):
    sent = message_send(conversation=conversation, user=user, content="hello", client_id="h")
    body = api.get(item(conversation.pk)).json()
    assert body["id"] == conversation.pk
    assert body["last_seq"] == 1
    assert body["messages"] == [
        {
            "id": sent.message.pk,
            "role": "user",
            "content": "hello",
            "client_id": "h",
            "run_id": None,
            "parent_id": None,
            "on_active_branch": True,
            "created_at": body["messages"][0]["created_at"],
        }
    ]
    (event,) = body["events"]
    assert event["type"] == "message.created"
    assert event["seq"] == 1
    assert event["run_id"] == sent.run.pk
    assert event["message"]["content"] == "hello"


def test_patch_renames_and_archives(api, conversation):
    response = api.patch(item(conversation.pk), {"title": "Renamed"}, content_type=JSON)
    assert response.status_code == 200
    assert response.json()["title"] == "Renamed"
    response = api.patch(item(conversation.pk), {"archived": True}, content_type=JSON)
    assert response.json()["archived"] is True
    conversation.refresh_from_db()
    assert (conversation.title, conversation.archived) == ("Renamed", True)
    response = api.patch(
        item(conversation.pk), {"title": "Both", "archived": False}, content_type=JSON
    )
    conversation.refresh_from_db()
    assert (conversation.title, conversation.archived) == ("Both", False)


@pytest.mark.parametrize(
    "payload", [{}, {"archived": "perhaps"}, {"title": "x" * 201}, {"title": None}]
)
def test_patch_rejects_bad_input_and_changes_nothing(api, conversation, payload):
    response = api.patch(item(conversation.pk), payload, content_type=JSON)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    conversation.refresh_from_db()
    assert (conversation.title, conversation.archived) == ("Alice's plans", False)


def test_delete(api, user, conversation):
    message_send(conversation=conversation, user=user, content="bye", client_id="b")
    response = api.delete(item(conversation.pk))
    assert response.status_code == 204
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Message.objects.exists()
    assert api.get(item(conversation.pk)).status_code == 404


def test_missing_conversation_is_404_with_a_code(api):
    response = api.get(item(999999))
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": "No such conversation."}


def test_profiles_lists_the_ones_i_may_use(api, user):
    default = AgentProfile.objects.get(is_default=True)
    group = Group.objects.create(name="researchers")
    mine = AgentProfile.objects.create(name="Research", slug="research")
    mine.allowed_groups.add(group)
    user.groups.add(group)
    hidden = AgentProfile.objects.create(name="Secret", slug="secret")
    hidden.allowed_groups.add(Group.objects.create(name="others"))
    body = api.get("/api/profiles/").json()
    assert [row["slug"] for row in body] == [default.slug, "research"]
    assert body[0] == {
        "slug": default.slug,
        "name": default.name,
        "description": default.description,
        "mode": default.mode,
        "is_default": True,
    }
