"""Encryption for write-only secrets (API keys, tool secrets) stored in the database.

The key is derived from SECRET_KEY with HKDF, so a database dump alone does not reveal them.
Rotating SECRET_KEY makes stored secrets unreadable: they must be entered again.
"""

import base64
import json
from collections.abc import Mapping
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


class SecretUnreadable(Exception):
    """The stored secret was written under another SECRET_KEY."""


@lru_cache(maxsize=4)
def _fernet(secret_key: str) -> Fernet:
    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=b"chatsite-secrets", info=b"fernet"
    ).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt_text(plain: str) -> str:
    if not plain:
        return ""
    return _fernet(settings.SECRET_KEY).encrypt(plain.encode()).decode()


def decrypt_text(token: str) -> str:
    if not token:
        return ""
    return _decrypted(settings.SECRET_KEY, token)


# Every run reads its endpoint's key, and Fernet's check and decryption cost the worker at
# every run (docs/performance.md#claim). A token always decrypts to the same text under one key,
# and the process holds that key anyway; an unreadable token raises each time (not cached).
@lru_cache(maxsize=256)
def _decrypted(secret_key: str, token: str) -> str:
    try:
        return _fernet(secret_key).decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise SecretUnreadable("secret was encrypted with a different SECRET_KEY") from exc


def encrypt_json(values: dict[str, str]) -> str:
    return encrypt_text(json.dumps(values)) if values else ""


def decrypt_json(token: str) -> dict[str, str]:
    return json.loads(decrypt_text(token)) if token else {}


def write_only_values_merged(
    *, current: Mapping[str, str], entered: Mapping[str, str]
) -> dict[str, str]:
    """``current`` with what was typed applied: a value replaces, an empty one removes."""
    merged = dict(current)
    for name, value in entered.items():
        if value:
            merged[name] = value
        else:
            merged.pop(name, None)
    return merged
