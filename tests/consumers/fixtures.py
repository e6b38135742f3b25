"""Fixtures the transport test folders (consumers, api, security) share via their conftest."""

from __future__ import annotations

import pytest

from agents.services.conversations import conversation_create
from tests.isolation import private_cache_prefix


@pytest.fixture(autouse=True)
def _transport_settings(settings):
    # Rate-limit counters live in the shared cache: a fresh key prefix per test.
    caches = {name: dict(config) for name, config in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = private_cache_prefix()
    settings.CACHES = caches
    # The test client speaks plain http; production redirects that to https.
    settings.SECURE_SSL_REDIRECT = False


@pytest.fixture
def conversation(user):
    return conversation_create(owner=user, title="Alice's plans")


@pytest.fixture
def other_conversation(other_user):
    return conversation_create(owner=other_user, title="Bob's notes")
