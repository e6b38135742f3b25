"""A test session keeps to its own names in Redis, and a test without a worker to its own
queue (tests/early_env.py, tests/isolation.py): two suites on one Redis never meet, and no
test leaves a task for a worker to find later."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
import redis
from celery import Celery
from django.conf import settings
from django.db import connection

from agents.tasks import run_execute
from chatsite.celery import app as celery_app
from tests.isolation import (
    folder_queue,
    private_queue,
    queue_length,
    session_keys_delete,
    session_name,
)
from tests.processes import BASE_DIR, process_env


def _session_of_a_new_process() -> str:
    probe = "import os, tests.early_env; print(os.environ['CHATSITE_TEST_SESSION'])"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=BASE_DIR, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def _another_suite(session: str) -> Celery:
    """A Celery app as another test session on the same Redis would configure it."""
    other = Celery("another-suite", set_as_current=False)
    other.conf.broker_url = settings.CELERY_BROKER_URL
    other.conf.broker_transport_options = {"global_keyprefix": f"{session}-celery:"}
    return other


def test_everything_the_session_keeps_in_redis_is_under_its_name():
    session = session_name()
    assert session.startswith("chatsite-test-")
    names = [
        settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"],
        settings.CACHES["default"]["KEY_PREFIX"],
        settings.CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"],
        settings.CELERY_TASK_DEFAULT_QUEUE,
    ]
    assert all(name.startswith(f"{session}-") for name in names), names
    assert len(set(names)) == len(names)
    celery_options = celery_app.conf.broker_transport_options
    assert celery_options["global_keyprefix"] == f"{session}-celery:"


def test_every_session_has_a_name_of_its_own():
    first, second = _session_of_a_new_process(), _session_of_a_new_process()
    assert len({first, second, session_name()}) == 3


@pytest.mark.django_db
def test_a_process_the_session_starts_shares_its_test_database_names_and_files():
    """The worker and daphne a test starts see what the test sees: under ``pytest -n``,
    the test database, Redis names and files of the xdist worker that started them."""
    probe = (
        "import os, django; django.setup();"
        " from django.conf import settings; from django.db import connection;"
        " print(connection.settings_dict['NAME'], os.environ['CHATSITE_TEST_SESSION'],"
        " settings.VAR_DIR, sep='\\n')"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=BASE_DIR, env=process_env(), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    database, session, var_dir = result.stdout.strip().splitlines()
    assert database == str(connection.settings_dict["NAME"])
    if connection.vendor == "postgresql":
        assert database.startswith("test_")  # pytest-django's, never the developer's own
    assert session == session_name()
    assert var_dir == str(settings.VAR_DIR)
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):
        assert database.endswith(f"_{worker}")
        assert settings.VAR_DIR.name == f"xdist-{worker}"


def test_a_task_sent_by_a_test_goes_to_its_folders_queue_not_the_workers():
    run_execute.delay(0)
    assert queue_length(folder_queue(BASE_DIR / "tests" / "test_isolation.py")) == 1
    assert queue_length(settings.CELERY_TASK_DEFAULT_QUEUE) == 0
    assert celery_app.conf.task_default_queue.startswith(settings.CELERY_TASK_DEFAULT_QUEUE)


def test_a_private_queue_is_empty_once_the_test_is_over():
    name = f"{settings.CELERY_TASK_DEFAULT_QUEUE}.check-{uuid.uuid4().hex[:6]}"
    with private_queue(name):
        run_execute.delay(0)
        run_execute.delay(0)
        assert queue_length(name) == 2
    assert queue_length(name) == 0


def test_a_task_of_one_session_is_invisible_to_another_on_the_same_redis(monkeypatch):
    # Not the session's own queue, which the session's worker (started by an integration
    # test earlier in the run) may empty before the queue's length is read.
    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}.isolation-{uuid.uuid4().hex[:6]}"
    other_session = f"chatsite-test-other-{uuid.uuid4().hex[:6]}"
    other = _another_suite(other_session)
    try:
        with private_queue(queue):
            run_execute.delay(0)
            with other.connection_for_write() as connection:
                # The same queue name, seen from the other session: nothing there.
                assert connection.default_channel.client.llen(queue) == 0
                other.send_task("agents.run_execute", args=[0], queue=queue)
                assert connection.default_channel.client.llen(queue) == 1
                assert queue_length(queue) == 1  # only our own
    finally:
        # As the other session would at its end.
        monkeypatch.setenv("CHATSITE_TEST_SESSION", other_session)
        assert session_keys_delete() >= 1


def test_the_sessions_keys_are_deleted_and_no_one_elses(monkeypatch):
    client = redis.Redis.from_url(settings.REDIS_URL)
    ended = f"chatsite-test-ended-{uuid.uuid4().hex[:6]}"
    neighbour = f"{ended}x-cache:1:counter"  # a session whose name starts like this one's
    keys = [f"{ended}-cache:1:counter", f"{ended}-celery:_kombu.binding.q", neighbour]
    try:
        for key in keys:
            client.set(key, "1")
        monkeypatch.setenv("CHATSITE_TEST_SESSION", ended)
        assert session_keys_delete() == 2
        assert [client.exists(key) for key in keys] == [0, 0, 1]
    finally:
        client.delete(*keys)
        client.close()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_sessions_worker_reads_the_sessions_queue_under_its_prefix(live_stack):
    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = settings.CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"]
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    try:
        # The worker declared its queue under the session's prefix.
        assert client.exists(f"{prefix}_kombu.binding.{queue}")
        assert live_stack.worker.queue == queue
        assert f"-Q {queue} " in " ".join(live_stack.worker.command()) + " "
        assert os.environ["CELERY_KEY_PREFIX"] == prefix
    finally:
        client.close()
