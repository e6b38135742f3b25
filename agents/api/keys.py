"""API keys at the door: who a ``Bearer`` key signs in, what it may do, how often.

``ApiKeyAuthentication`` turns ``Authorization: Bearer cs-…`` into the key's owner (with the
key as ``request.auth``); ``KeyScope`` refuses a view whose ``required_scope`` the key lacks;
``ApiKeyRateThrottle`` counts each request in the key's own sliding window
(agents/ratelimit.py). What the key then starts goes through the same services as the web
chat, as its owner, so the owner's quota, profiles and approvals apply unchanged.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.utils.translation import gettext as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from agents import selectors
from agents.models import ApiKey
from agents.ratelimit import rate_limit_hit
from agents.services.api_keys import KEY_PREFIX, api_key_hash, api_key_mark_used


def KeyRefused(message: str, code: str) -> exceptions.AuthenticationFailed:
    """A 401 whose ``code`` says which: a key that is not one, revoked, or its owner disabled."""
    return exceptions.AuthenticationFailed(message, code)


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiKey] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise KeyRefused(_("Send one key: Authorization: Bearer cs-…"), "invalid_key")
        try:
            secret = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise KeyRefused(_("That API key is not valid."), "invalid_key") from None
        key = (
            selectors.api_key_by_hash(secret_hash=api_key_hash(secret))
            if secret.startswith(KEY_PREFIX)
            else None
        )
        if key is None:
            raise KeyRefused(_("That API key is not valid."), "invalid_key")
        if key.revoked_at is not None:
            raise KeyRefused(
                _("This API key was revoked on %(date)s.") % {"date": key.revoked_at.date()},
                "key_revoked",
            )
        if not key.owner.is_active:
            raise KeyRefused(_("The account this key belongs to is disabled."), "inactive_user")
        api_key_mark_used(key=key)
        return key.owner, key

    def authenticate_header(self, request: Request) -> str:
        # Makes a refusal a 401 (with this challenge), not a 403.
        return f'{self.keyword} realm="api"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """How the schema names the key: an HTTP bearer token."""

    target_class = "agents.api.keys.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "cs-…"}


class InsufficientScope(exceptions.PermissionDenied):
    default_code = "insufficient_scope"


class KeyScope(BasePermission):
    """The view's ``required_scope`` must be one of the key's scopes."""

    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.auth
        scope = getattr(view, "required_scope", None)
        if not isinstance(key, ApiKey) or request.user is None:
            return False
        if scope is not None and not key.has_scope(scope):
            raise InsufficientScope(
                _("This key does not have the %(scope)s scope.") % {"scope": scope}
            )
        return True


class KeyScopeOrSession(KeyScope):
    """A key's scope as ``KeyScope``; a signed-in session (the site's own pages) may do what
    its user may, with DRF's CSRF check on every write."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if isinstance(request.auth, ApiKey):
            return super().has_permission(request, view)
        return bool(request.user and request.user.is_authenticated)


class ApiKeyRateThrottle(BaseThrottle):
    """Each key's own requests a minute; past it, 429 with ``Retry-After``."""

    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            return True
        limit = key.requests_per_minute
        if limit is None:
            limit = settings.CHAT_API_KEY_REQUESTS_PER_MINUTE
        # The window is the key's, not its owner's: keys of one user do not share it.
        decision = rate_limit_hit(action="api_key", user_id=key.pk, limit=limit)
        self.retry_after = decision.retry_after
        return decision.allowed

    def wait(self) -> float | None:
        return self.retry_after
