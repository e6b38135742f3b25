"""chatsite/server/sockets/session.py: the session a socket's cookie names, and its messages
untouched."""

from __future__ import annotations

import asyncio

from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore

from chatsite.server.sockets.session import SocketSessionMiddleware


def _open(cookies: dict[str, str]) -> tuple[dict, object, object]:
    seen: dict = {}

    async def inner(scope, receive, send):
        seen.update(scope=scope, receive=receive, send=send)

    async def receive():
        return {}

    async def send(message):
        return None

    scope = {"type": "websocket", "path": "/ws/", "cookies": cookies}
    asyncio.run(SocketSessionMiddleware(inner)(scope, receive, send))
    assert "session" not in scope, "the caller's scope is left as it was"
    assert seen["receive"] is receive
    return seen["scope"], seen["send"], send


def test_the_cookie_names_the_session_and_messages_go_out_unwrapped():
    key = "k" * 32
    scope, passed_send, send = _open({settings.SESSION_COOKIE_NAME: key})
    session = scope["session"]
    assert isinstance(session, SessionStore)
    assert session.session_key == key
    assert not session.accessed, "nothing was read while the socket opened"
    # No wrapper per message: a run's frames reach daphne with no session check each.
    assert passed_send is send


def test_no_cookie_or_a_malformed_one_gives_a_session_without_a_key():
    for cookies in ({}, {settings.SESSION_COOKIE_NAME: "short"}):
        scope, _, _ = _open(cookies)
        assert scope["session"].session_key is None
