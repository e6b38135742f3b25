"""The socket's session, for reading: ``scope["session"]`` is the session its cookie names.

Channels' ``SessionMiddleware`` is made for HTTP as well: it builds the session store in a
database thread and wraps every message the application sends, to save a session that an
HTTP response changed and set its cookie. A socket never saves its session (the consumer
reads who it is and their language, ``agents/session_check.py``), yet each frame of a run
went through that wrapper's checks (docs/performance.md#socket-opening). Here the store is
made where the socket opens (making one reads nothing; the first read of its data does) and
the messages go out as they are.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.conf import settings


class SocketSessionMiddleware:
    """Inside Channels' ``CookieMiddleware``, which parses ``scope["cookies"]``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        store = import_module(settings.SESSION_ENGINE).SessionStore
        session_key = scope["cookies"].get(settings.SESSION_COOKIE_NAME)
        return await self.inner({**scope, "session": store(session_key)}, receive, send)
