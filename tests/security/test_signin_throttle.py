"""Failed sign-ins are throttled (django-axes), on the site and the admin, without telling
which usernames exist."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-1"
SITE = "/accounts/login/"
ADMIN = "/admin/login/"


@pytest.fixture(autouse=True)
def _plain_http(settings):
    settings.SECURE_SSL_REDIRECT = False
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    settings.AXES_FAILURE_LIMIT = 5
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


def sign_in(client: Client, url: str, username: str, password: str):
    return client.post(url, {"username": username, "password": password})


def fail(client: Client, url: str, username: str, times: int) -> list:
    return [sign_in(client, url, username, "wrong-password") for _ in range(times)]


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.parametrize("url", [SITE, ADMIN])
def test_after_five_failures_even_the_right_password_is_refused(client, make_user, url):
    make_user("alice", is_staff=True)
    failures = fail(client, url, "alice", 5)
    assert all(response.status_code == 200 for response in failures[:4])
    locked = sign_in(client, url, "alice", PASSWORD)
    assert locked.status_code == 429
    assert "Too many failed sign-ins" in locked.content.decode()
    assert "paused for 15 minutes" in locked.content.decode()
    assert not signed_in(client)


def test_an_unknown_username_gets_exactly_the_same_answers(make_user):
    make_user("alice")
    known, unknown = Client(), Client()
    known_answers = fail(known, SITE, "alice", 6)
    unknown_answers = fail(unknown, SITE, "nobody-by-this-name", 6)
    for mine, theirs in zip(known_answers, unknown_answers, strict=True):
        assert mine.status_code == theirs.status_code
        # The sign-in form echoes the username back; everything else must match.
        assert _without_form_noise(mine, "alice") == _without_form_noise(
            theirs, "nobody-by-this-name"
        )
    assert known_answers[-1].status_code == 429


def _without_form_noise(response, username: str) -> str:
    import re

    html = response.content.decode().replace(username, "USERNAME")
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", html)


def test_the_lock_is_per_username_and_address(client, make_user):
    make_user("alice")
    make_user("bob")
    fail(client, SITE, "alice", 5)
    assert sign_in(client, SITE, "alice", PASSWORD).status_code == 429
    # Another account from the same address, and the same account from elsewhere, still work.
    assert sign_in(Client(), SITE, "bob", PASSWORD).status_code == 302
    elsewhere = Client(REMOTE_ADDR="203.0.113.9")
    assert sign_in(elsewhere, SITE, "alice", PASSWORD).status_code == 302


def test_a_success_clears_the_count(client, make_user):
    make_user("alice")
    fail(client, SITE, "alice", 4)
    assert sign_in(client, SITE, "alice", PASSWORD).status_code == 302
    client.logout()
    fail(client, SITE, "alice", 4)
    assert sign_in(client, SITE, "alice", PASSWORD).status_code == 302


def test_the_lock_lifts_after_the_cool_off(client, make_user):
    from axes.models import AccessAttempt

    make_user("alice")
    fail(client, SITE, "alice", 5)
    assert sign_in(client, SITE, "alice", PASSWORD).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert sign_in(client, SITE, "alice", PASSWORD).status_code == 302
    assert signed_in(client)


def test_guessing_the_old_password_on_the_change_form_is_throttled(client, make_user):
    user = make_user("pat")
    client.force_login(user)
    form = {"new_password1": "a-new-pass-phrase-77", "new_password2": "a-new-pass-phrase-77"}

    guesses = [
        client.post("/accounts/password/", {**form, "old_password": f"guess-{n}"}).status_code
        for n in range(5)
    ]
    right = client.post("/accounts/password/", {**form, "old_password": "pw-for-tests-1"})

    assert guesses == [200] * 5  # the form says the old password is wrong
    assert right.status_code == 429
    assert "Too many attempts to change the password" in right.content.decode()
    user.refresh_from_db()
    assert user.check_password("pw-for-tests-1")
