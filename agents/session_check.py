"""Whether a socket's session signs its user in: when it opens, and before every write.

A logout closes the user's sockets (``ConversationConsumer.chat_signed_out``), but a
channel-layer message can be lost, and a session also ends by expiring or by a password
change; so a socket asks again before it writes. The answer is the one
``django.contrib.auth.get_user`` gives for that session. Through ``get_user`` it costs two
ORM reads (the session, then the user), mostly in building them
(docs/performance.md#session-check). On the database session engine the two rows come in one plain
statement, and the decision is made from them with Django's own pieces: the session store's
``decode``, the backend's ``user_can_authenticate``, the user's session auth hash (with
``SECRET_KEY_FALLBACKS``). Other engines, user models and backends take ``get_user`` itself.

Two differences from ``get_user``, both in what it writes, not in its answer: a session
whose hash fails is refused without being flushed (the next request through the site flushes
it), and one signed with a fallback secret is accepted without rotating its key (rotating it
here would delete the session the browser's cookie names).

A socket opening on its owner's conversation is decided the same way (``socket_opening``),
with the owner's row and the conversation's last seq in the same statement; every other
opening (a refusal, another engine) goes through Channels' ``get_user`` as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from types import SimpleNamespace
from typing import Any, cast

from django.conf import settings
from django.contrib import auth
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from agents.db import statements
from agents.db.rows import column_converter, instance
from agents.models import AgentRun
from chatsite.server.db.prepared import prepared_cursor

DATABASE_ENGINE = "django.contrib.sessions.backends.db"


def session_signs_in(*, session_key: str | None, user_id: int | None) -> bool:
    """True if the session ``session_key`` signs in the user ``user_id``, as
    ``django.contrib.auth.get_user`` would decide; False for a missing key, a session that
    ended (signed out, expired, a password change since) or a user who may no longer sign in.
    """
    if not session_key or user_id is None:
        return False
    if not decided_here():
        return _signs_in_through_get_user(session_key, user_id)
    row = _session_and_user(session_key, user_id)
    if row is None:  # no such session, expired, or no such user
        return False
    return signs_in_read(session_key=session_key, user_id=user_id, values=row)


def _read_signs_in(*, session_key: str, session_data: str | None, user: User) -> bool:
    """``session_signs_in`` from rows another statement read (where ``decided_here``): the
    data of the unexpired session ``session_key`` (None: there is no such session) and
    ``user`` with its password and ``is_active``."""
    if session_data is None:
        return False
    verdict = _verdict(SessionStore().decode(session_data), user)
    if verdict is None:
        return _signs_in_through_get_user(session_key, user.pk)
    return verdict


def signs_in_params(session_key: str) -> list[Any]:
    """The session's key and now, for an unexpired session's ``session_key = %s AND
    expire_date > %s`` (the statements of ``agents.db.statements``' session section, and
    ``statements.session_columns`` in another module's statement)."""
    return [session_key, connection.ops.adapt_datetimefield_value(timezone.now())]


def signs_in_read(*, session_key: str, user_id: int, values: Sequence[Any]) -> bool:
    """``session_signs_in`` from the columns of ``statements.session_columns``."""
    session_data, password, is_active = values
    user = User(pk=user_id, password=password, is_active=_is_active(is_active))
    return _read_signs_in(session_key=session_key, session_data=session_data, user=user)


def _is_active(value: Any) -> bool:
    return bool(column_converter(User, "is_active")(value))


@dataclass(frozen=True)
class SocketOpening:
    """What a socket of the conversation's owner needs to open (``socket_opening``)."""

    user: User
    session: dict[str, Any]  # the session's data, decoded
    last_seq: int
    # A run of the conversation was queued or running as it was read: only such a run's
    # live text can be in Redis (agents/live.py) for the socket to send as it opens.
    run_active: bool


def socket_opening(*, session_key: str | None, conversation_id: int) -> SocketOpening | None:
    """The conversation's owner, the session's data and the conversation's last seq, if the
    session ``session_key`` signs in that owner (as ``session_signs_in`` decides): one
    statement, where Channels' ``AuthMiddleware`` and the socket's own read took three.

    None in every other case (no such session or conversation, another user's session, an
    ended sign-in, or a session engine, user model or backend decided elsewhere): the socket
    then asks Channels' ``get_user`` and refuses or opens as it always has.
    """
    if not session_key or not decided_here():
        return None
    row = _session_and_owner(session_key, conversation_id)
    if row is None:
        return None
    session_data, owner, last_seq, run_active = row
    session: dict[str, Any] = SessionStore().decode(session_data)
    if _verdict(session, owner) is not True:
        return None
    return SocketOpening(user=owner, session=session, last_seq=last_seq, run_active=run_active)


class SignedOut(Exception):
    """The socket's session no longer signs this user in."""


def decided_here() -> bool:
    """The sessions are rows of the database engine and the users Django's own model."""
    return settings.SESSION_ENGINE == DATABASE_ENGINE and settings.AUTH_USER_MODEL == "auth.User"


def _verdict(session: dict[str, Any], user: User) -> bool | None:
    """Whether the session's data signs in ``user`` (read with its password and
    ``is_active``), as ``get_user`` decides; None for a backend that finds its users its own
    way, which only ``get_user`` can ask."""
    try:
        stored_id = User._meta.pk.to_python(session[auth.SESSION_KEY])
        backend_path = session[auth.BACKEND_SESSION_KEY]
    except KeyError:
        return False
    if stored_id != user.pk or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    backend = auth.load_backend(backend_path)
    if not isinstance(backend, ModelBackend) or type(backend).get_user is not ModelBackend.get_user:
        return None
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


def _session_and_user(session_key: str, user_id: int) -> tuple[Any, ...] | None:
    """The unexpired session's data with the user's password and ``is_active`` (as
    ``signs_in_read`` takes them), one statement (plain SQL: building the ORM's two queries
    cost daphne more than running them)."""
    return _read_with_session(statements.session_and_user(), session_key, [user_id])


def _session_and_owner(
    session_key: str, conversation_id: int
) -> tuple[str, User, int, bool] | None:
    """The unexpired session's data, the conversation's owner (every column), its last seq
    and whether a run of it is queued or running, one statement."""
    active = [str(status) for status in AgentRun.ACTIVE_STATUSES]
    row = _read_with_session(
        statements.session_and_owner(active=len(active)), session_key, [*active, conversation_id]
    )
    if row is None:
        return None
    session_data, last_seq, run_active, *user_values = row
    user = cast(User, instance(User, user_values))
    return session_data, user, int(last_seq), bool(run_active)


def _read_with_session(sql: str, session_key: str, params: list[Any]) -> tuple[Any, ...] | None:
    """One row of a statement that reads the unexpired session ``session_key`` (or None).
    ``params``: the statement's own, before the session's key and now."""
    with prepared_cursor() as cursor:
        cursor.execute(sql, [*params, *signs_in_params(session_key)])
        return cursor.fetchone()


def _signs_in_through_get_user(session_key: str, user_id: int) -> bool:
    """The generic answer, for any session engine: ``get_user`` on the stored session."""
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    current = auth.get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
    return bool(current.is_authenticated and current.pk == user_id)
