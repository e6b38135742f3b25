"""Django's ASGI handler for paths whose responses stream for long (the key API's server-sent
events, chatsite/asgi.py), without a thread of each request's own.

Django's handler gives every request a thread-sensitive context: the first synchronous hop
of the request (a sync middleware, ``MiddlewareMixin``'s hops, the ``request_started``
signal's receivers) starts a thread that stays parked until the response has been sent,
however long it streams. Here the request runs in no such context, so those few short hops
share the process's one thread-sensitive thread, and only the middleware named (each of
which must be async-capable, or be only ``MiddlewareMixin`` hooks that touch no database)
wraps the views; the views do their own work on a shared pool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler

AsgiApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class StreamingHandler(ASGIHandler):
    def __init__(self, middleware: list[str]) -> None:
        self.middleware_paths = list(middleware)
        super().__init__()

    def load_middleware(self, is_async: bool = False) -> None:
        # Django builds the chain from settings.MIDDLEWARE only: name ours for the build,
        # once, at start-up, before the process serves anything.
        site_middleware = settings.MIDDLEWARE
        settings.MIDDLEWARE = self.middleware_paths
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = site_middleware

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)


def by_path_prefix(prefix: str, app: AsgiApp, default: AsgiApp) -> AsgiApp:
    """HTTP requests whose path starts with ``prefix`` go to ``app``, the rest to ``default``."""

    async def route(scope: dict[str, Any], receive: Any, send: Any) -> None:
        chosen = app if scope.get("path", "").startswith(prefix) else default
        await chosen(scope, receive, send)

    return route
