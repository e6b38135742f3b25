"""agents/crypto.py: secrets round-trip, and a key change makes them unreadable, cached or not."""

from __future__ import annotations

import pytest

from agents.crypto import SecretUnreadable, decrypt_text, encrypt_text


def test_a_secret_reads_back_and_reads_the_same_again(settings):
    token = encrypt_text("sk-test-123")
    assert decrypt_text(token) == "sk-test-123"
    assert decrypt_text(token) == "sk-test-123"  # from the cache
    assert decrypt_text("") == ""


def test_a_secret_read_once_is_still_unreadable_under_another_key(settings):
    token = encrypt_text("sk-test-456")
    assert decrypt_text(token) == "sk-test-456"
    settings.SECRET_KEY = "another key entirely, " + "z" * 40
    for _ in range(2):  # an unreadable token is refused every time, not remembered
        with pytest.raises(SecretUnreadable):
            decrypt_text(token)
