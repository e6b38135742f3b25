"""Single sign-on with OpenID Connect: mozilla-django-oidc's code flow, with what it leaves
to the site.

- The provider's endpoints come from its discovery document (``OIDC_ISSUER`` +
  ``/.well-known/openid-configuration``), fetched on the first sign-in of a process, unless
  settings name them.
- The ID token is checked for its issuer, its audience (this site's client id) and its
  expiry, besides the signature and nonce the library checks; the user info must be about
  the token's subject.
- A returning user is found by the provider's (issuer, subject), never by email or username
  (``ProviderIdentity``); a new one is created (``agents/services/accounts.py``), and on
  every sign-in the groups and staff flag follow the claims.
- Every refusal (a state that this browser did not start, a token for another audience or
  out of date, the provider out of reach) ends on the sign-in page with a message that says
  which, and signs no one in.

The backend's ``get_user`` is Django's own, so a deactivated user's sessions end and the
sockets' session check (agents/session_check.py) decides these sessions without a detour.
With ``OIDC_ENABLED`` off the views answer 404 and the backend is not installed.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core import checks
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext as _
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from agents import selectors
from agents.services import accounts

logger = logging.getLogger(__name__)

_ERROR_CODE = re.compile(r"[a-z_]{1,64}")

# Where the reason of a refused sign-in waits for the callback view (set by the backend).
REFUSAL_ATTRIBUTE = "sso_refusal"


class SignInRefused(Exception):
    """A sign-in through the provider that must not sign anyone in; the message says why."""


# --------------------------------------------------------------------------------------
# The provider's endpoints
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoints:
    authorization: str
    token: str
    userinfo: str
    jwks: str


_discovered: dict[str, dict[str, Any]] = {}
_discovery_lock = threading.Lock()


def endpoints() -> Endpoints:
    """The endpoints settings name, the rest from the issuer's discovery document."""
    named = Endpoints(
        authorization=settings.OIDC_OP_AUTHORIZATION_ENDPOINT,
        token=settings.OIDC_OP_TOKEN_ENDPOINT,
        userinfo=settings.OIDC_OP_USER_ENDPOINT,
        jwks=settings.OIDC_OP_JWKS_ENDPOINT,
    )
    if all(vars(named).values()):
        return named
    document = _discovery_document(settings.OIDC_ISSUER)
    try:
        return Endpoints(
            authorization=named.authorization or document["authorization_endpoint"],
            token=named.token or document["token_endpoint"],
            userinfo=named.userinfo or document["userinfo_endpoint"],
            jwks=named.jwks or document["jwks_uri"],
        )
    except KeyError as missing:
        raise SignInRefused(
            _("The identity provider's configuration names no %(endpoint)s.")
            % {"endpoint": missing.args[0]}
        ) from None


def _discovery_document(issuer: str) -> dict[str, Any]:
    """Fetched once per process: only a document that was read is kept, so a provider out of
    reach is asked again at the next sign-in."""
    with _discovery_lock:
        if issuer not in _discovered:
            url = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
            try:
                response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
                response.raise_for_status()
                document = response.json()
            except (requests.RequestException, ValueError) as error:
                logger.warning("reading %s failed: %s", url, error)
                raise SignInRefused(_("The identity provider could not be reached.")) from error
            if not isinstance(document, dict) or document.get("issuer") != issuer:
                raise SignInRefused(
                    _("The identity provider's configuration names another issuer.")
                )
            _discovered[issuer] = document
        return _discovered[issuer]


# --------------------------------------------------------------------------------------
# The authentication backend
# --------------------------------------------------------------------------------------


class OpenIDBackend(OIDCAuthenticationBackend):
    # Django's: an inactive user's sessions end (the library's returns any user), and the
    # sockets' session check recognises it (agents/session_check.py).
    get_user = ModelBackend.get_user

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        if request is None or not settings.OIDC_ENABLED:
            return None
        if "nonce" not in kwargs:  # not the callback's call: a password, another backend's
            return None
        try:
            found = endpoints()
            self.OIDC_OP_TOKEN_ENDPOINT = found.token
            self.OIDC_OP_USER_ENDPOINT = found.userinfo
            self.OIDC_OP_JWKS_ENDPOINT = found.jwks
            return super().authenticate(request, **kwargs)
        except SignInRefused as refused:
            reason = str(refused)
        except ValidationError as invalid:
            reason = " ".join(invalid.messages)
        except requests.RequestException as error:
            logger.warning("the identity provider refused or failed: %s", error)
            reason = _("The identity provider did not complete the sign-in.")
        except SuspiciousOperation as suspicious:  # the library's: signature, nonce, key
            logger.warning("an ID token failed verification: %s", suspicious)
            reason = _("The identity provider's token failed verification.")
        setattr(request, REFUSAL_ATTRIBUTE, reason)
        return None

    def _verify_jws(self, payload: bytes | str, key: Any) -> dict[str, Any]:
        """The library's check of the signature, with the issuer, audience and expiry too."""
        algorithm = jwt.get_unverified_header(payload).get("alg")
        if algorithm != self.OIDC_RP_SIGN_ALGO:
            raise SignInRefused(_("The identity provider's token is signed the wrong way."))
        try:
            claims: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[algorithm],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.OIDC_ISSUER,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
                leeway=30,  # the clocks of two machines
            )
        except jwt.InvalidAudienceError:
            raise SignInRefused(
                _("The identity provider's token was issued for another application.")
            ) from None
        except jwt.ExpiredSignatureError:
            raise SignInRefused(
                _("The identity provider's token has expired; please sign in again.")
            ) from None
        except jwt.InvalidIssuerError:
            raise SignInRefused(
                _("The identity provider's token comes from another issuer.")
            ) from None
        except jwt.InvalidTokenError as error:
            logger.warning("an ID token was refused: %s", error)
            raise SignInRefused(_("The identity provider's token failed verification.")) from None
        return claims

    def get_or_create_user(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> User | None:
        claims = self.get_userinfo(access_token, id_token, payload)
        # The ID token's claims first, the user info's over them; both about one subject.
        if claims.get("sub") != payload.get("sub"):
            raise SignInRefused(_("The identity provider's answers are about different users."))
        merged = {**payload, **claims}
        user = selectors.users_of_provider_identity(
            issuer=settings.OIDC_ISSUER, subject=str(payload["sub"])
        ).first()
        if user is None:
            return accounts.user_create_from_claims(issuer=settings.OIDC_ISSUER, claims=merged)
        if not self.user_can_authenticate(user):
            raise SignInRefused(_("This account is deactivated."))
        return accounts.user_update_from_claims(user=user, claims=merged)


# --------------------------------------------------------------------------------------
# The views
# --------------------------------------------------------------------------------------


def _refused(request: HttpRequest, reason: str) -> HttpResponse:
    """Back to the sign-in page, which says why (the reason goes on after a colon)."""
    reason = reason[:1].lower() + reason[1:]
    messages.error(request, _("Single sign-on failed: %(reason)s") % {"reason": reason})
    return HttpResponseRedirect(reverse("login"))


class SignInStart(OIDCAuthenticationRequestView):
    """The sign-in page's button: to the provider, with a fresh state, nonce and PKCE."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404(_("Single sign-on is not configured."))
        try:
            self.OIDC_OP_AUTH_ENDPOINT = endpoints().authorization
        except SignInRefused as refused:
            return _refused(request, str(refused))
        return super().get(request)


class SignInCallback(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back; every way it can fail says why."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404(_("Single sign-on is not configured."))
        if error := request.GET.get("error"):
            super().get(request)  # forgets the state, signs out whoever was signed in
            # An error code (RFC 6749, 4.1.2.1) is a word; anything else in a link someone
            # sent is not repeated on the page.
            code = error if _ERROR_CODE.fullmatch(error) else "?"
            return _refused(
                request, _("the identity provider answered “%(error)s”.") % {"error": code}
            )
        state = request.GET.get("state")
        if not request.GET.get("code") or state not in request.session.get("oidc_states", {}):
            return _refused(
                request,
                _(
                    "this answer does not belong to a sign-in started in this browser, "
                    "or it was used already. Please sign in again."
                ),
            )
        response: HttpResponse = super().get(request)
        if getattr(self, "user", None) is not None and request.user.is_authenticated:
            return response
        reason = getattr(request, REFUSAL_ATTRIBUTE, None) or _("this account may not sign in.")
        return _refused(request, reason)


sign_in_start = SignInStart.as_view()
sign_in_callback = SignInCallback.as_view()


# --------------------------------------------------------------------------------------
# manage.py check
# --------------------------------------------------------------------------------------


def check_configuration(**kwargs: Any) -> list[checks.CheckMessage]:
    """A half-set configuration is an error, not a silent "off"."""
    problems: list[checks.CheckMessage] = []
    given = {
        "OIDC_ISSUER": settings.OIDC_ISSUER,
        "OIDC_CLIENT_ID": settings.OIDC_RP_CLIENT_ID,
        "OIDC_CLIENT_SECRET": settings.OIDC_RP_CLIENT_SECRET,
    }
    missing = [name for name, value in given.items() if not value]
    if missing and len(missing) < len(given):
        problems.append(
            checks.Error(
                f"Single sign-on is half configured: {', '.join(missing)} not set.",
                hint="Set all three to switch it on, or none to leave it off.",
                id="agents.E301",
            )
        )
    if not settings.SIGNIN_PASSWORD_ENABLED and not settings.OIDC_ENABLED:
        problems.append(
            checks.Error(
                "SIGNIN_PASSWORD_ENABLED is off and single sign-on is not configured: "
                "nobody can sign in.",
                hint="Configure OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET.",
                id="agents.E302",
            )
        )
    return problems
