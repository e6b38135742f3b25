"""The user's API keys page (user menu → API keys) and the admin's list of everyone's keys."""

from __future__ import annotations

import pytest

from agents.models import ApiKey
from agents.services.api_keys import api_key_create, api_key_hash

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _plain_static_files(settings):
    # Pages name static files; the tests have no collected manifest.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def test_a_new_key_is_shown_once_and_only_its_hash_is_stored(signed_in, user):
    made = signed_in.post("/account/api-keys/", {"name": "CI bot", "scopes": ["read"]})
    assert made.status_code == 302

    page = signed_in.get("/account/api-keys/").content.decode()
    key = ApiKey.objects.get(owner=user)
    secret = page.split('id="new-key-secret" type="text" readonly value="')[1].split('"')[0]
    assert secret.startswith("cs-")
    assert key.secret_hash == api_key_hash(secret)
    assert secret not in str(ApiKey.objects.values().get())
    assert key.name == "CI bot"
    assert key.scopes == ["read"]

    again = signed_in.get("/account/api-keys/").content.decode()
    assert secret not in again
    assert key.prefix in again


def test_a_key_without_a_name_or_scope_is_refused_and_none_is_made(signed_in):
    no_name = signed_in.post("/account/api-keys/", {"name": " ", "scopes": ["chat"]})
    no_scope = signed_in.post("/account/api-keys/", {"name": "bot"})

    assert no_name.status_code == 400
    assert "Give the key a name." in no_name.content.decode()
    assert no_scope.status_code == 400
    assert "Choose the key" in no_scope.content.decode()
    assert not ApiKey.objects.exists()


def test_the_owner_revokes_a_key_and_nobody_else_can(signed_in, user, other_user, client):
    mine = api_key_create(owner=user, name="mine", scopes=["chat"]).key
    theirs = api_key_create(owner=other_user, name="theirs", scopes=["chat"]).key

    assert signed_in.post(f"/account/api-keys/{theirs.pk}/revoke/").status_code == 404
    assert signed_in.post(f"/account/api-keys/{mine.pk}/revoke/").status_code == 302

    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.revoked_at is not None
    assert mine.revoked_by == user
    assert theirs.revoked_at is None
    assert "theirs" not in signed_in.get("/account/api-keys/").content.decode()


def test_staff_see_everyones_keys_and_revoke_them_in_the_admin(client, make_user, user):
    staff = make_user("staffer", is_staff=True, is_superuser=True)
    key = api_key_create(owner=user, name="someone's", scopes=["read"]).key
    client.force_login(staff)

    listed = client.get("/admin/agents/apikey/")
    assert listed.status_code == 200
    assert "someone&#x27;s" in listed.content.decode()
    client.post(
        "/admin/agents/apikey/",
        {"action": "revoke", "_selected_action": [key.pk]},
    )

    key.refresh_from_db()
    assert key.revoked_at is not None
    assert key.revoked_by == staff
