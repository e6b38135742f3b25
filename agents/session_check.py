"""Whether a socket's session still signs its user in: the check before every write.

A logout closes the user's sockets (``ConversationConsumer.chat_signed_out``), but a
channel-layer message can be lost, and a session also ends by expiring or by a password
change; so a socket asks again before it writes. The answer is the one
``django.contrib.auth.get_user`` gives for that session. Through ``get_user`` it costs two
ORM reads (the session, then the user), and building them was a tenth of daphne's CPU with
200 agent runs at once. On the database session engine the two rows come in one plain
statement, and the decision is made from them with Django's own pieces: the session store's
``decode``, the backend's ``user_can_authenticate``, the user's session auth hash (with
``SECRET_KEY_FALLBACKS``). Other engines, user models and backends take ``get_user`` itself.

Two differences from ``get_user``, both in what it writes, not in its answer: a session
whose hash fails is refused without being flushed (the next request through the site flushes
it), and one signed with a fallback secret is accepted without rotating its key (rotating it
here would delete the session the browser's cookie names).
"""

from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.contrib import auth
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from agents.prepared import prepared_cursor
from agents.rows import column_converter

DATABASE_ENGINE = "django.contrib.sessions.backends.db"


def session_signs_in(*, session_key: str | None, user_id: int | None) -> bool:
    """True if the session ``session_key`` signs in the user ``user_id``, as
    ``django.contrib.auth.get_user`` would decide; False for a missing key, a session that
    ended (signed out, expired, a password change since) or a user who may no longer sign in.
    """
    if not session_key or user_id is None:
        return False
    if settings.SESSION_ENGINE != DATABASE_ENGINE or settings.AUTH_USER_MODEL != "auth.User":
        return _signs_in_through_get_user(session_key, user_id)
    row = _session_and_user(session_key, user_id)
    if row is None:  # no such session, expired, or no such user
        return False
    session_data, password, is_active = row
    session: dict[str, Any] = SessionStore().decode(session_data)
    try:
        stored_id = User._meta.pk.to_python(session[auth.SESSION_KEY])
        backend_path = session[auth.BACKEND_SESSION_KEY]
    except KeyError:
        return False
    if stored_id != user_id or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    backend = auth.load_backend(backend_path)
    if not isinstance(backend, ModelBackend) or type(backend).get_user is not ModelBackend.get_user:
        # A backend that finds its users its own way: let it.
        return _signs_in_through_get_user(session_key, user_id)
    user = User(pk=user_id, password=password, is_active=is_active)
    if not backend.user_can_authenticate(user):
        return False
    return _hash_verified(user, session.get(auth.HASH_SESSION_KEY))


def _hash_verified(user: User, session_hash: str | None) -> bool:
    """The session's auth hash matches the user's password now, with the current secret key
    or one of ``SECRET_KEY_FALLBACKS`` (what ``get_user`` accepts)."""
    if not session_hash:
        return False
    if constant_time_compare(session_hash, user.get_session_auth_hash()):
        return True
    return any(
        constant_time_compare(session_hash, fallback)
        for fallback in user.get_session_auth_fallback_hash()
    )


def _session_and_user(session_key: str, user_id: int) -> tuple[str, str, bool] | None:
    """The unexpired session's data with the user's password and ``is_active``, one statement
    (plain SQL: building the ORM's two queries cost daphne more than running them)."""
    quote = connection.ops.quote_name
    sessions = quote(SessionStore.get_model_class()._meta.db_table)
    users = quote(User._meta.db_table)
    sql = f"""
        SELECT s.session_data, u.password, u.is_active
        FROM {sessions} AS s JOIN {users} AS u ON u.id = %s
        WHERE s.session_key = %s AND s.expire_date > %s
    """  # noqa: S608 (only table names are formatted in)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with prepared_cursor() as cursor:
        cursor.execute(sql, [user_id, session_key, now])
        row = cursor.fetchone()
    if row is None:
        return None
    session_data, password, is_active = row
    return session_data, password, column_converter(User, "is_active")(is_active)


def _signs_in_through_get_user(session_key: str, user_id: int) -> bool:
    """The generic answer, for any session engine: ``get_user`` on the stored session."""
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    current = auth.get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
    return bool(current.is_authenticated and current.pk == user_id)
