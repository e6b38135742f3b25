"""Users signed in by the identity provider (agents/sso.py): created on their first sign-in,
their groups and staff flag kept in step with the provider's claims on every sign-in.

The groups a claim manages are ``OIDC_MANAGED_GROUPS`` (every group when empty): each of
them the user is in exactly when the claim names it; any other group (one granted in the
admin) is left as it is. A name in the claim with no Django group is skipped unless
``OIDC_CREATE_GROUPS``, so a provider that lists hundreds of groups does not fill the admin
with them: staff create the groups they restrict agent profiles to.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from agents.models import ProviderIdentity

logger = logging.getLogger(__name__)

# What Django's username validator allows; anything else in a claim becomes "-".
_NOT_USERNAME = re.compile(r"[^\w.@+-]")
_USERNAME_MAX = User._meta.get_field("username").max_length or 150


def username_from_claim(value: Any) -> str:
    """A username Django accepts, from the claim's value: normalised, only the characters
    Django's validator allows, at most the field's length (a suffix, when taken, is added by
    ``user_create_from_claims``). Refused when nothing usable is left."""
    if not isinstance(value, str):
        raise ValidationError(_("The identity provider sent no usable username."), code="username")
    cleaned = _NOT_USERNAME.sub("-", unicodedata.normalize("NFKC", value).strip())
    cleaned = cleaned.strip("-.")[: _USERNAME_MAX - 8]
    if not cleaned:
        raise ValidationError(_("The identity provider sent no usable username."), code="username")
    return cleaned


def claimed_groups(claims: Mapping[str, Any]) -> set[str]:
    """The group names of the groups claim: a list of strings (a single string counts as one
    name). A claim that is missing means no groups: the provider is the one that decides."""
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    if value is None:
        return set()
    if isinstance(value, str):
        return {value}
    if isinstance(value, list | tuple):
        return {name for name in value if isinstance(name, str) and name}
    raise ValidationError(_("The identity provider's groups claim is not a list."), code="groups")


@transaction.atomic
def user_create_from_claims(*, issuer: str, claims: Mapping[str, Any]) -> User:
    """A new user for the provider's account ``(issuer, claims["sub"])``, named after
    ``OIDC_USERNAME_CLAIM`` (a number is added when that name is taken: a local account of
    the same name or email is never taken over), with no usable password, then kept in step
    like every sign-in (``user_update_from_claims``)."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise ValidationError(_("The identity provider sent no subject."), code="subject")
    base = username_from_claim(claims.get(settings.OIDC_USERNAME_CLAIM))
    username, suffix = base, 1
    while User.objects.filter(username__iexact=username).exists():
        suffix += 1
        username = f"{base}-{suffix}"
    user = User.objects.create_user(username, email=_email(claims))
    ProviderIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    return user_update_from_claims(user=user, claims=claims)


@transaction.atomic
def user_update_from_claims(*, user: User, claims: Mapping[str, Any]) -> User:
    """The user's email, staff flag and managed groups as the claims say, at this sign-in."""
    groups = claimed_groups(claims)
    changed = []
    email = _email(claims)
    if email and email != user.email:
        user.email = email
        changed.append("email")
    if settings.OIDC_STAFF_GROUP and user.is_staff != (settings.OIDC_STAFF_GROUP in groups):
        user.is_staff = settings.OIDC_STAFF_GROUP in groups
        changed.append("is_staff")
    if changed:
        user.save(update_fields=changed)
    user_groups_sync(user=user, names=groups)
    return user


def user_groups_sync(*, user: User, names: set[str]) -> None:
    """The user is in each managed group whose name is in ``names`` and in no other managed
    group; groups the claim does not manage are left as they are."""
    managed = set(settings.OIDC_MANAGED_GROUPS)
    wanted = {name for name in names if not managed or name in managed}
    existing = {group.name: group for group in Group.objects.filter(name__in=wanted)}
    for name in sorted(wanted - existing.keys()):
        if settings.OIDC_CREATE_GROUPS:
            existing[name] = Group.objects.create(name=name)
        else:
            logger.info("the identity provider names group %r, which does not exist here", name)
    current = user.groups.all()
    if managed:
        current = current.filter(name__in=managed)
    user.groups.remove(*[group for group in current if group.name not in wanted])
    user.groups.add(*existing.values())


def _email(claims: Mapping[str, Any]) -> str:
    email = claims.get("email")
    return email if isinstance(email, str) else ""
