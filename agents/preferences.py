"""A user's language and theme: where the page finds them, and how they reach the session.

The stored choice (``UserPreference``, written by ``agents/services/preferences.py``) is
copied into the session when the user signs in, so a request reads it without a query; the
browser's cookies carry it too, so the sign-in page of the same browser looks the same.
Without a stored choice the browser decides: its language cookie, else Accept-Language
(Django's LocaleMiddleware), and its ``prefers-color-scheme``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.http.cookie import parse_cookie
from django.utils import translation
from django.utils.translation.trans_real import parse_accept_lang_header

from agents import selectors
from agents.models import UserPreference

SESSION_KEY = "chatsite_preferences"
# Read by the server to render the page's theme before any script runs: no flash.
THEME_COOKIE = "chatsite_theme"
THEME_COOKIE_AGE = 365 * 24 * 3600
THEMES = frozenset(UserPreference.Theme.values)


def supported_language(code: str | None) -> str | None:
    """``code`` as one of settings.LANGUAGES (``zh-CN`` → ``zh-hans``), or None."""
    if not code:
        return None
    try:
        return translation.get_supported_language_variant(code)
    except LookupError:
        return None


def remember_in_session(session: Any, preference: UserPreference | None) -> None:
    session[SESSION_KEY] = {
        "language": preference.language if preference else "",
        "theme": preference.theme if preference else UserPreference.Theme.SYSTEM,
    }


def session_preferences(session: Any) -> dict[str, str]:
    stored = session.get(SESSION_KEY) if session is not None else None
    return stored if isinstance(stored, dict) else {}


def chosen_language(request: HttpRequest) -> str | None:
    """The signed-in user's own choice of language, if they made one."""
    if not request.user.is_authenticated:
        return None
    return supported_language(session_preferences(request.session).get("language"))


def chosen_theme(request: HttpRequest) -> str:
    """The user's theme, else this browser's last one: ``system``, ``light`` or ``dark``."""
    theme = None
    if request.user.is_authenticated:
        theme = session_preferences(request.session).get("theme")
    if theme not in THEMES:
        theme = request.COOKIES.get(THEME_COOKIE)
    return theme if theme in THEMES else UserPreference.Theme.SYSTEM


def load_on_sign_in(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """``user_logged_in``: the choice made on another device applies here from now on."""
    if request is None or not hasattr(request, "session"):
        return
    remember_in_session(request.session, selectors.preference_get(user=user))


def preferences_context(request: HttpRequest) -> dict[str, Any]:
    """Template context: the theme for ``<html data-theme>`` and the menu's choices."""
    return {
        "theme": chosen_theme(request),
        "themes": UserPreference.Theme.choices,
    }


def socket_language(scope: dict[str, Any], *, session: Any = None) -> str:
    """The language of a websocket's messages, chosen as a page request's would be.

    ``session``: the session's data if it was read already, else the scope's session is.
    Blocking (it may read the session): call it from a database thread.
    """
    user = scope.get("user")
    if user is not None and user.is_authenticated:
        stored = session_preferences(scope.get("session") if session is None else session).get(
            "language"
        )
        if chosen := supported_language(stored):
            return chosen
    headers = dict(scope.get("headers") or [])
    cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin-1"))
    if chosen := supported_language(cookies.get(settings.LANGUAGE_COOKIE_NAME)):
        return chosen
    for code, _quality in parse_accept_lang_header(
        headers.get(b"accept-language", b"").decode("latin-1")
    ):
        if code != "*" and (chosen := supported_language(code)):
            return chosen
    return settings.LANGUAGE_CODE
