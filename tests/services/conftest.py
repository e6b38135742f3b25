from __future__ import annotations

import pytest
from django.utils import timezone

from agents.models import AgentProfile, AgentRun, Message
from agents.services.conversations import conversation_create
from agents.services.prompt_versions import prompt_version_ensure
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


@pytest.fixture
def helper(db) -> AgentProfile:
    """The profile a parent delegates to (the sub-agent tests)."""
    return AgentProfile.objects.create(name="Helper", slug="helper", max_iterations=6)


@pytest.fixture
def parent(user) -> AgentRun:
    """A run going on a worker, the parent of the sub-agent tests."""
    profile = AgentProfile.objects.create(name="Lead", slug="lead", max_iterations=4)
    conversation = conversation_create(owner=user, profile=profile)
    question = Message.objects.create(conversation=conversation, role="user", content="Go")
    return AgentRun.objects.create(
        conversation=conversation,
        trigger_message=question,
        profile_version=prompt_version_ensure(profile=profile),
        model_name="demo",
        status=AgentRun.Status.RUNNING,
        worker_id="worker:1",
        heartbeat_at=timezone.now(),
        attempts=1,
        started_at=timezone.now(),
    )
