"""The websocket handshake's Origin check: the page must come from this very site.

A socket carries the session cookie, so a page of another origin that opens it acts as the
user. Browsers send ``Origin`` on every websocket handshake; it must equal, in scheme, host
*and* port, either the site's own origin (the handshake's ``Host`` with the request's
scheme, as Django's CSRF check does) or an entry of ``CSRF_TRUSTED_ORIGINS``. A page on the
same host at another port is another origin. Anything else is refused during the handshake
(daphne answers HTTP 403).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """(scheme, host, port) of an http(s) origin, the port filled in; None if it is not one."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _headers(scope: dict[str, Any]) -> dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers", [])}


def _request_scheme(scope: dict[str, Any], headers: dict[bytes, bytes]) -> str:
    """http or https, as the browser sees the site (Django's SECURE_PROXY_SSL_HEADER rule)."""
    if settings.SECURE_PROXY_SSL_HEADER:
        meta_name, secure_value = settings.SECURE_PROXY_SSL_HEADER
        header = meta_name.removeprefix("HTTP_").lower().replace("_", "-").encode()
        if header in headers:
            forwarded = headers[header].decode("latin-1").split(",")[0].strip()
            return "https" if forwarded == secure_value else "http"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


def own_origin(scope: dict[str, Any]) -> Origin | None:
    """The site's origin as this handshake names it; None if its Host is not allowed."""
    headers = _headers(scope)
    host = headers.get(b"host", b"").decode("latin-1")
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return parse_origin(f"{_request_scheme(scope, headers)}://{host}")


def _trusted(origin: Origin) -> bool:
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        # CSRF_TRUSTED_ORIGINS may name every subdomain as "https://*.example.com".
        wildcard = "://*." in entry
        trusted = parse_origin(entry.replace("://*.", "://", 1) if wildcard else entry)
        if trusted is None or trusted[0] != scheme or trusted[2] != port:
            continue
        if host == trusted[1] or (wildcard and is_same_domain(host, "." + trusted[1])):
            return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    raw = _headers(scope).get(b"origin")
    origin = parse_origin(raw.decode("latin-1")) if raw else None
    if origin is None:
        return False
    return origin == own_origin(scope) or _trusted(origin)


class SameOriginValidator:
    """ASGI middleware for the websocket router: refuses handshakes from other origins."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
