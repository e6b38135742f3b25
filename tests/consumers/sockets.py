"""Opening the real ASGI application's websocket as a given user, for the transport tests.

Tests here are plain functions that run their async body with ``run(...)``. The consumers
make their database calls on threads of their own (``_in_database_thread`` in
agents/consumers.py), each with its own connection: what a test writes for a socket to read
must be committed first, so these tests are ``transaction=True``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from chatsite.asgi import application

ORIGIN = "http://localhost"
# Generous bound for one frame; only reached when a test is about to fail anyway.
FRAME_TIMEOUT = 10
# How long "nothing else arrives" is watched for.
QUIET_SECONDS = 0.5


def run(body: Callable[[], Awaitable[Any]]) -> Any:
    return async_to_sync(body)()


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def socket(
    conversation_id: int,
    *,
    cookie: str | None = None,
    after_seq: int | str | None = None,
    origin: str | None = ORIGIN,
    host: str = "localhost",
    scheme: str = "ws",
) -> WebsocketCommunicator:
    """A communicator for one conversation; ``cookie`` from ``session_cookie`` (sync)."""
    path = f"/ws/conversations/{conversation_id}/"
    if after_seq is not None:
        path += f"?after_seq={after_seq}"
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if cookie is not None:
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    communicator.scope["scheme"] = scheme
    return communicator


def notifications_socket(cookie: str) -> WebsocketCommunicator:
    """A communicator for ``/ws/notifications/``; ``cookie`` from ``session_cookie``."""
    session = f"{settings.SESSION_COOKIE_NAME}={cookie}"
    headers = [(b"host", b"localhost"), (b"origin", ORIGIN.encode()), (b"cookie", session.encode())]
    return WebsocketCommunicator(application, "/ws/notifications/", headers=headers)


async def receive(communicator: WebsocketCommunicator) -> dict[str, Any]:
    return await communicator.receive_json_from(timeout=FRAME_TIMEOUT)


async def receive_seqs(communicator: WebsocketCommunicator, count: int) -> list[int]:
    return [(await receive(communicator))["seq"] for _ in range(count)]


async def close_code(communicator: WebsocketCommunicator) -> int | None:
    """The code of the close that follows a handshake, or None if the socket stayed open."""
    output = await communicator.receive_output(timeout=FRAME_TIMEOUT)
    return output.get("code") if output["type"] == "websocket.close" else None


async def send(communicator: WebsocketCommunicator, frame: dict[str, Any]) -> None:
    await communicator.send_json_to(frame)


def client_id() -> str:
    return uuid.uuid4().hex
