"""The socket's session check (agents/session_check.py) answers as ``auth.get_user`` does.

On the database session engine it reads in one statement; each case checks that statement
was the only one and that ``get_user`` itself (the generic path) gives the same answer.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.backends import ModelBackend
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.session_check import _signs_in_through_get_user, session_signs_in

pytestmark = pytest.mark.django_db

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class LookupBackend(ModelBackend):
    """A backend that finds its users its own way: the check leaves it to ``get_user``."""

    looked_up: list[int] = []

    def get_user(self, user_id):
        self.looked_up.append(user_id)
        return super().get_user(user_id)


def sign_in(user, *, backend: str | None = None) -> tuple[Client, str]:
    client = Client()
    client.force_login(user, backend=backend)
    return client, client.cookies[settings.SESSION_COOKIE_NAME].value


def answer(session_key: str | None, user_id: int | None) -> bool:
    """The check's answer, after checking it took one statement and agrees with get_user."""
    with CaptureQueriesContext(connection) as queries:
        signs_in = session_signs_in(session_key=session_key, user_id=user_id)
    assert len(queries) == (1 if session_key and user_id is not None else 0)
    if session_key and user_id is not None:
        # After the check: get_user flushes a session whose hash fails.
        assert _signs_in_through_get_user(session_key, user_id) == signs_in
    return signs_in


def edit_session(session_key: str, **changes) -> None:
    store = SessionStore(session_key)
    for key, value in changes.items():
        if value is None:
            store.pop(key, None)
        else:
            store[key] = value
    store.save()


def test_a_live_session_signs_its_user_in(user):
    _client, key = sign_in(user)

    assert answer(key, user.pk)


def test_after_a_logout_it_does_not(user):
    client, key = sign_in(user)
    client.logout()

    assert not answer(key, user.pk)


def test_an_expired_session_does_not(user):
    _client, key = sign_in(user)
    Session.objects.filter(pk=key).update(expire_date=timezone.now() - timedelta(seconds=1))

    assert not answer(key, user.pk)


def test_a_password_change_ends_the_session(user):
    _client, key = sign_in(user)
    user.set_password("a-new-password-1")
    user.save()

    assert not answer(key, user.pk)


def test_a_deactivated_user_is_signed_out(user):
    _client, key = sign_in(user)
    user.is_active = False
    user.save()

    assert not answer(key, user.pk)


def test_a_backend_that_lets_inactive_users_in_decides_so(settings, user):
    """``is_active`` is the backend's to weigh (``user_can_authenticate``), not the check's."""
    backend = "django.contrib.auth.backends.AllowAllUsersModelBackend"
    settings.AUTHENTICATION_BACKENDS = [backend]
    _client, key = sign_in(user, backend=backend)
    user.is_active = False
    user.save()

    assert answer(key, user.pk)


def test_a_deleted_user_is_signed_out(user):
    _client, key = sign_in(user)
    user_id = user.pk
    user.delete()

    assert not answer(key, user_id)


def test_another_users_session_does_not_sign_this_user_in(user, other_user):
    _client, others_key = sign_in(other_user)

    assert not answer(others_key, user.pk)


def test_another_users_session_is_refused_even_when_its_auth_hash_matches(user, other_user):
    """The same stored password gives the same auth hash: only the user id tells them apart."""
    other_user.password = user.password
    other_user.save()
    _client, others_key = sign_in(other_user)

    assert not answer(others_key, user.pk)


@pytest.mark.parametrize("session_key", [None, "", "no-such-session-key"])
def test_a_missing_or_unknown_session_key_signs_nobody_in(user, session_key):
    assert not answer(session_key, user.pk)


def test_a_session_without_its_auth_hash_does_not(user):
    _client, key = sign_in(user)
    edit_session(key, **{auth.HASH_SESSION_KEY: None})

    assert not answer(key, user.pk)


def test_a_session_whose_backend_is_no_longer_configured_does_not(settings, user):
    _client, key = sign_in(user, backend=MODEL_BACKEND)
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.RemoteUserBackend"]

    assert not answer(key, user.pk)


def test_session_data_that_fails_its_signature_signs_nobody_in(user):
    _client, key = sign_in(user)
    Session.objects.filter(pk=key).update(session_data="not:signed")

    assert not answer(key, user.pk)


@pytest.mark.parametrize("old_key_kept", [True, False])
def test_a_session_from_before_a_key_rotation_needs_the_old_key_in_the_fallbacks(
    settings, user, old_key_kept
):
    old_key = settings.SECRET_KEY
    _client, key = sign_in(user)
    settings.SECRET_KEY = "a-new-secret-key-" + "x" * 40
    settings.SECRET_KEY_FALLBACKS = [old_key] if old_key_kept else []

    assert answer(key, user.pk) is old_key_kept


def test_a_backend_with_its_own_user_lookup_is_asked(settings, user):
    backend = f"{__name__}.LookupBackend"
    settings.AUTHENTICATION_BACKENDS = [backend]
    _client, key = sign_in(user, backend=backend)
    LookupBackend.looked_up.clear()

    assert session_signs_in(session_key=key, user_id=user.pk)
    assert LookupBackend.looked_up == [user.pk]


@pytest.mark.parametrize(
    "engine",
    ["django.contrib.sessions.backends.signed_cookies", "django.contrib.sessions.backends.cache"],
)
def test_other_session_engines_are_checked_by_get_user(settings, user, engine):
    """No ``django_session`` row: only ``get_user`` can sign these in, and it still refuses a
    session whose password changed."""
    settings.SESSION_ENGINE = engine
    _client, key = sign_in(user)

    assert session_signs_in(session_key=key, user_id=user.pk)

    user.set_password("a-new-password-1")
    user.save()
    assert not session_signs_in(session_key=key, user_id=user.pk)


def test_a_logout_on_the_cache_engine_is_seen(settings, user):
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    client, key = sign_in(user)
    client.logout()

    assert not session_signs_in(session_key=key, user_id=user.pk)
