"""Middleware of the whole site: the Content-Security-Policy header on every response, and
a signed-in user's own language and theme (agents/preferences.py).

Every response means pages, the admin, the JSON API, static files and the error pages
Django renders itself (404, 500, 403, a CSRF failure): the policy is set here, outside the
views, so none can forget it. A response that sets its own policy keeps it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseBase
from django.utils import translation

from agents.preferences import (
    THEME_COOKIE,
    THEME_COOKIE_AGE,
    chosen_language,
    chosen_theme,
)


def content_security_policy(request: HttpRequest) -> str:
    """No inline script or style anywhere, sockets only back to this host, no framing."""
    try:
        host = request.get_host()
    except DisallowedHost:
        # Django answers a Host it does not serve with a 400; that page gets the policy too,
        # with sockets allowed to no host but the page's own origin.
        sockets = ""
    else:
        sockets = f" ws://{host} wss://{host}"
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            f"connect-src 'self'{sockets}",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


class ContentSecurityPolicyMiddleware:
    # Either way: the key API's stack is async end to end (chatsite/server/streaming.py);
    # the site's takes it as a sync middleware, as before.
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        return self._with_policy(request, self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        return self._with_policy(request, await self.get_response(request))

    @staticmethod
    def _with_policy(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = content_security_policy(request)
        return response


class UserPreferenceMiddleware:
    """After AuthenticationMiddleware: the signed-in user's stored language wins over the
    browser's (LocaleMiddleware chose that one). The browser's cookies are kept in step, so
    this browser's signed-out pages (sign-in, after sign-out) keep the user's language and
    theme."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if language := chosen_language(request):
            translation.activate(language)
            request.LANGUAGE_CODE = translation.get_language()
        response = self.get_response(request)
        # Read again: the request may just have signed in (agents/preferences.py).
        if request.user.is_authenticated:
            language = chosen_language(request)
            if language and request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) != language:
                set_language_cookie(response, language)
            theme = chosen_theme(request)
            if request.COOKIES.get(THEME_COOKIE, "system") != theme:
                set_theme_cookie(response, theme)
        return response


def set_language_cookie(response: HttpResponseBase, language: str) -> None:
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        language,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )


def set_theme_cookie(response: HttpResponseBase, theme: str) -> None:
    response.set_cookie(
        THEME_COOKIE,
        theme,
        max_age=THEME_COOKIE_AGE,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )
