from __future__ import annotations

import pytest

from agents.models import AgentProfile
from agents.services.conversations import conversation_create
from tests.clock import minute_turn_clock  # noqa: F401 - a fixture, found by name
from tests.isolation import private_cache_prefix


@pytest.fixture(autouse=True)
def _private_cache(settings):
    """Rate-limit counters live in Redis: give each test its own key prefix."""
    caches = {name: dict(config) for name, config in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = private_cache_prefix()
    settings.CACHES = caches


@pytest.fixture
def default_profile(db) -> AgentProfile:
    # Seeded by ensure_defaults on post_migrate (agents/apps.py).
    return AgentProfile.objects.get(is_default=True)


@pytest.fixture
def conversation(user, default_profile):
    return conversation_create(owner=user)
