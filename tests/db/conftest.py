from __future__ import annotations

import pytest

from tests.isolation import private_cache_prefix


@pytest.fixture(autouse=True)
def _private_cache(settings):
    """Rate-limit counters live in Redis: give each test its own key prefix."""
    caches = {name: dict(config) for name, config in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = private_cache_prefix()
    settings.CACHES = caches
