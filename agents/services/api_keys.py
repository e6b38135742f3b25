"""API keys: made, used and revoked (docs/protocol.md, "API keys").

A key is ``cs-`` and 43 URL-safe characters; it is shown once, by ``api_key_create``, and only
its SHA-256 is kept. A revoked key stays listed (who made it, when it was last used) and is
refused from then on.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.translation import gettext as _

from agents.models import ApiKey
from agents.protocol import RefusalCode, RequestRefused

KEY_PREFIX = "cs-"
# How much of a key lists show, the prefix included: enough to tell keys apart.
SHOWN_CHARS = 10
NAME_MAX_CHARS = 100
# last_used_at is a hint for people, so a busy key writes it at most this often.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class NewKey:
    key: ApiKey
    # The whole secret: shown to its owner this once, never stored.
    secret: str


def api_key_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_key_create(*, owner: User, name: str, scopes: Iterable[str]) -> NewKey:
    name = name.strip()
    if not name:
        raise RequestRefused(RefusalCode.EMPTY, _("Give the key a name."))
    if len(name) > NAME_MAX_CHARS:
        raise RequestRefused(
            RefusalCode.TOO_LONG,
            _("A key's name is at most %(limit)s characters.") % {"limit": NAME_MAX_CHARS},
        )
    known = {str(scope) for scope in ApiKey.Scope}
    chosen = sorted(set(scopes))
    if not chosen or not set(chosen) <= known:
        raise RequestRefused(
            RefusalCode.INVALID_FIELD, _("Choose the key's scopes: read, chat or both.")
        )
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        owner=owner,
        name=name,
        prefix=secret[:SHOWN_CHARS],
        secret_hash=api_key_hash(secret),
        scopes=chosen,
    )
    return NewKey(key=key, secret=secret)


def api_key_revoke(*, key: ApiKey, by: User) -> ApiKey:
    """Revoke a key (its owner or staff); revoking it again changes nothing."""
    if key.revoked_at is None:
        updated = ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=by
        )
        if updated:
            key.refresh_from_db(fields=["revoked_at", "revoked_by"])
    return key


def api_key_mark_used(*, key: ApiKey) -> None:
    now = timezone.now()
    if key.last_used_at is not None and now - key.last_used_at < LAST_USED_RESOLUTION:
        return
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    key.last_used_at = now
