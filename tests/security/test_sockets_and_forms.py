"""Cross-site sockets, CSRF on every form and endpoint, login everywhere, oversized input."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from agents.models import AgentRun, Conversation, Message
from agents.services.conversations import message_send
from tests.consumers.sockets import (
    QUIET_SECONDS,
    receive,
    run,
    send,
    session_cookie,
    socket,
)

# Pages an anonymous visitor must be able to open: signing in and recovering an account.
PUBLIC_ROUTE_NAMES = {
    # The key API's OpenAPI document: what the endpoints take and answer, no user data.
    "schema",
    "login",
    "signup",
    "password_reset",
    "password_reset_done",
    "password_reset_confirm",
    "password_reset_complete",
    # The interface's translated strings, which the sign-in page may need too: no user data.
    "javascript-catalog",
    # The site's icon, which browsers fetch for the sign-in page too: no user data.
    "favicon",
    # Single sign-on's way out to the provider and back in (404 when it is not configured).
    "oidc_authentication_init",
    "oidc_authentication_callback",
}


def site_routes() -> Iterator[tuple[str, str | None]]:
    """Every URL outside the admin (which has its own staff checks), with ids filled in."""

    def walk(patterns, prefix: str) -> Iterator[tuple[str, str | None]]:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                yield route, pattern.name

    for route, name in walk(get_resolver().url_patterns, ""):
        if route.startswith("admin/"):
            continue
        path = re.sub(r"<int:[^>]+>", "1", route)
        path = re.sub(r"<uuid:[^>]+>", "00000000-0000-4000-8000-000000000001", path)
        path = re.sub(r"<(?:str:|slug:)?[^>]+>", "x", path)
        yield "/" + path, name


def test_the_walk_covers_pages_and_api():
    paths = {path for path, _ in site_routes()}
    assert "/api/conversations/" in paths
    assert "/api/runs/1/cancel/" in paths
    assert "/accounts/login/" in paths


# ---- login -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_page_and_endpoint_needs_a_login_except_the_account_pages():
    anonymous = Client()
    login = reverse("login")
    for path, name in site_routes():
        if name in PUBLIC_ROUTE_NAMES:
            continue
        response = anonymous.get(path)
        if path.startswith("/v1/"):
            # The key API: an API key signs a request in, nothing else (agents/api/keys.py).
            assert response.status_code == 401, path
            assert response.json()["code"] == "not_authenticated", path
        elif path.startswith("/api/"):
            assert response.status_code == 403, path
            assert response.json()["code"] == "not_authenticated", path
        else:
            # A page that only answers POST turns a GET away before asking who you are.
            assert response.status_code in (302, 405), path
            if response.status_code == 302:
                assert response["Location"].startswith(login), path


# ---- CSRF ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_post_without_a_csrf_token_is_refused(user, conversation):
    message_send(conversation=conversation, user=user, content="keep me", client_id="k")
    before = (
        list(Conversation.objects.values_list("pk", "title", "archived", "last_seq")),
        list(Message.objects.values_list("pk", "content")),
        list(AgentRun.objects.values_list("pk", "status", "cancel_requested_at")),
    )
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    for path, _ in site_routes():
        path = path.replace("/1/", f"/{conversation.pk}/")
        for method in ("post", "patch", "delete"):
            response = getattr(browser, method)(path, {}, content_type="application/json")
            # The key API takes no session cookie at all, so a forged form has nothing to
            # ride on: without a key it is a 401.
            refused = (401,) if path.startswith("/v1/") else (403, 405)
            assert response.status_code in refused, (method, path, response.status_code)
    after = (
        list(Conversation.objects.values_list("pk", "title", "archived", "last_seq")),
        list(Message.objects.values_list("pk", "content")),
        list(AgentRun.objects.values_list("pk", "status", "cancel_requested_at")),
    )
    assert after == before


# ---- cross-site websockets -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "https://localhost.evil.example",
        "http://127.0.0.1.evil.example:8000",
        "http://evil-localhost",
        "null",
        "file://",
        "",
        None,
    ],
)
def test_a_cross_site_or_originless_socket_is_refused_at_the_handshake(user, conversation, origin):
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, origin=origin)
        connected, _ = await communicator.connect()
        return connected

    assert run(body) is False


def _connects(user, conversation, **socket_options) -> bool:
    cookie = session_cookie(user)

    async def body():
        communicator = socket(conversation.pk, cookie=cookie, **socket_options)
        connected, _ = await communicator.connect()
        if connected:
            await communicator.disconnect()
        return connected

    return run(body)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://localhost", "localhost", "ws"),
        ("http://LOCALHOST:80", "localhost", "ws"),
        ("https://localhost", "localhost", "wss"),
        ("http://localhost:8000", "localhost:8000", "ws"),
        ("http://[::1]:8000", "[::1]:8000", "ws"),
    ],
)
def test_a_same_origin_socket_is_accepted(user, conversation, origin, host, scheme):
    assert _connects(user, conversation, origin=origin, host=host, scheme=scheme)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://localhost:9000", "localhost:8000", "ws"),  # same host, another port
        ("http://localhost:8000", "localhost", "ws"),
        ("http://localhost", "localhost:8000", "ws"),
        ("https://localhost", "localhost", "ws"),  # same host, another scheme
        ("http://localhost", "localhost", "wss"),
        ("http://127.0.0.1:8000", "localhost:8000", "ws"),  # another allowed host
        ("http://evil.example", "evil.example", "ws"),  # a Host not in ALLOWED_HOSTS
    ],
)
def test_another_origin_is_refused_even_on_the_same_host(user, conversation, origin, host, scheme):
    assert not _connects(user, conversation, origin=origin, host=host, scheme=scheme)


@pytest.mark.django_db(transaction=True)
def test_a_trusted_origin_behind_a_tls_proxy_is_accepted(user, conversation, settings):
    # TLS ends at the proxy: the handshake reaches daphne as plain ws on an internal port.
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com", "https://*.example.org"]
    assert _connects(user, conversation, origin="https://chat.example.com", host="localhost:8001")
    assert _connects(user, conversation, origin="https://eu.example.org", host="localhost:8001")
    assert not _connects(
        user, conversation, origin="https://chat.example.com:8443", host="localhost:8001"
    )
    assert not _connects(user, conversation, origin="http://chat.example.com", host="localhost")


@pytest.mark.django_db(transaction=True)
def test_the_forwarded_scheme_counts_when_the_proxy_header_is_trusted(user, conversation, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    cookie = session_cookie(user)

    async def body(forwarded: str) -> bool:
        communicator = socket(conversation.pk, cookie=cookie, origin="https://localhost")
        communicator.scope["headers"].append((b"x-forwarded-proto", forwarded.encode()))
        connected, _ = await communicator.connect()
        if connected:
            await communicator.disconnect()
        return connected

    assert run(functools.partial(body, "https"))
    assert not run(functools.partial(body, "http"))


# ---- oversized input -------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_message_at_the_limit_is_accepted_and_one_over_is_refused(user, conversation, client):
    client.force_login(user)
    url = f"/api/conversations/{conversation.pk}/messages/"
    limit = settings.CHAT_MAX_MESSAGE_CHARS
    over = client.post(url, {"content": "a" * (limit + 1)}, content_type="application/json")
    assert over.status_code == 400
    assert over.json() == {
        "code": "too_long",
        "message": f"The message is longer than {limit} characters.",
    }
    at = client.post(url, {"content": "a" * limit}, content_type="application/json")
    assert at.status_code == 201


@pytest.mark.django_db
def test_a_request_body_over_the_upload_limit_is_a_json_413(user, conversation, client):
    client.force_login(user)
    body = {"content": "a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)}
    response = client.post(
        f"/api/conversations/{conversation.pk}/messages/", body, content_type="application/json"
    )
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_megabyte_frame_is_refused_and_the_socket_stays_open(user, conversation):
    cookie = session_cookie(user)
    huge = '{"type": "message.send", "client_id": "big", "content": "' + "a" * 2**20 + '"}'

    async def body():
        communicator = socket(conversation.pk, cookie=cookie)
        assert (await communicator.connect())[0]
        await communicator.send_to(text_data=huge)
        refused = await receive(communicator)
        await send(communicator, {"type": "message.send", "content": "small", "client_id": "s"})
        created = await receive(communicator)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return refused, created

    refused, created = run(body)
    assert refused["code"] == "frame_too_large"
    assert created["type"] == "message.created"
    assert list(Message.objects.values_list("content", flat=True)) == ["small"]
