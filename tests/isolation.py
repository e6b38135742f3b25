"""Where the tasks a test sends go, and what the session leaves in Redis.

Every test session has its own names in Redis (``tests/early_env.py``): a channel-layer and a
cache prefix, a Celery key prefix, and the queue its worker processes read. Inside a session,
a test that starts no worker sends its tasks to its folder's own queue, which no worker reads
and which is emptied when the test ends (``private_queue``, an autouse fixture in
``tests/conftest.py``): the session's worker, which takes tasks only during ``live_stack``
tests, never runs a task another test left behind. At the end of the session every key under
its names is deleted.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from celery.signals import before_task_publish
from django.conf import settings

from chatsite.celery import app as celery_app

TESTS_DIR = Path(__file__).resolve().parent

# A test asking for one of these has a worker reading the session's queue.
WORKER_FIXTURES = frozenset({"live_stack", "celery_worker", "spawn_worker"})


def session_name() -> str:
    return os.environ["CHATSITE_TEST_SESSION"]


def private_cache_prefix() -> str:
    """A cache key prefix of the test's own, under the session's (deleted with it)."""
    return f"{settings.CACHES['default']['KEY_PREFIX']}-{uuid.uuid4().hex}"


def folder_queue(test_path: Path) -> str:
    """The queue of the test folder ``test_path`` is in (``…-runs.consumers``)."""
    parts = Path(test_path).resolve().relative_to(TESTS_DIR).parts
    folder = parts[0] if len(parts) > 1 else "top"
    return f"{settings.CELERY_TASK_DEFAULT_QUEUE}.{folder}"


def queue_length(name: str) -> int:
    with celery_app.connection_for_write() as connection:
        return connection.default_channel.client.llen(name)


def queue_purge(name: str) -> int:
    with celery_app.connection_for_write() as connection:
        return connection.default_channel.queue_purge(name) or 0


@contextlib.contextmanager
def private_queue(name: str) -> Iterator[str]:
    """Tasks this process sends go to ``name`` and never run inline; emptied at the end."""
    sent: list[str] = []

    def note(routing_key: str = "", **_: object) -> None:
        sent.append(routing_key)

    conf = celery_app.conf
    original = (conf.task_default_queue, conf.task_always_eager)
    conf.task_default_queue, conf.task_always_eager = name, False
    before_task_publish.connect(note, weak=False)
    try:
        yield name
    finally:
        before_task_publish.disconnect(note)
        conf.task_default_queue, conf.task_always_eager = original
        # Only when something was sent: most tests never touch Redis, and need not.
        if sent:
            queue_purge(name)


def session_keys_delete() -> int:
    """Delete every key the session wrote under its names; how many there were."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{session_name()}-*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        return len(keys)
    finally:
        client.close()
