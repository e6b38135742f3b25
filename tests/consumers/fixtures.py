"""Fixtures the transport test folders (consumers, api, security) share via their conftest."""

from __future__ import annotations

import uuid

import pytest

from agents.services.conversations import conversation_create
from chatsite.celery import app as celery_app


@pytest.fixture(autouse=True)
def _transport_settings(settings):
    # Rate-limit counters live in the shared cache: a fresh key prefix per test.
    caches = {name: dict(config) for name, config in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = f"test-{uuid.uuid4().hex}"
    settings.CACHES = caches
    # The test client speaks plain http; production redirects that to https.
    settings.SECURE_SSL_REDIRECT = False


# A queue no worker reads. tests/processes.py keeps a celery worker alive for the rest of the
# session once a test asks for one; it must not run the runs these tests queue and change
# what they assert (these tests check the queued run row and its events, not a run).
PRIVATE_QUEUE = "chatsite-transport-tests"


@pytest.fixture(autouse=True)
def _no_worker_takes_queued_runs():
    original = (celery_app.conf.task_default_queue, celery_app.conf.task_always_eager)
    # Never run inline either, whatever CELERY_TASK_ALWAYS_EAGER the environment sets.
    celery_app.conf.task_default_queue, celery_app.conf.task_always_eager = PRIVATE_QUEUE, False
    yield
    celery_app.conf.task_default_queue, celery_app.conf.task_always_eager = original
    with celery_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(PRIVATE_QUEUE)


@pytest.fixture
def conversation(user):
    return conversation_create(owner=user, title="Alice's plans")


@pytest.fixture
def other_conversation(other_user):
    return conversation_create(owner=other_user, title="Bob's notes")
