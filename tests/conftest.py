"""Fixtures shared by every test folder. Each folder keeps its own in its conftest.py."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations
from django.utils import translation
from hypothesis import settings as hypothesis_settings

from tests.flushed_database import flush_retried_on_deadlock, flushed_by_delete
from tests.isolation import WORKER_FIXTURES, folder_queue, private_queue, session_keys_delete

# Real celery worker / daphne processes for integration tests (documented in the module);
# pytester runs a pytest of its own to check the suite's plugins; the OpenID provider of the
# single sign-on tests.
pytest_plugins = ["tests.processes", "pytester", "tests.oidc_provider.process"]

_usernames = itertools.count(1)
E2E_FOLDER = Path(__file__).resolve().parent / "e2e"

# The suite asserts no timings: Hypothesis's default deadline per example is one, and failed
# property tests on a loaded machine and under mutmut's tracing (make mutation).
hypothesis_settings.register_profile("chatsite", deadline=None)
hypothesis_settings.load_profile("chatsite")


def pytest_itemcollected(item) -> None:
    """Every test in tests/e2e is a browser test: marked here too, before ``-m`` selects and
    before the browser tests are put last, so a file that forgets its ``pytestmark`` cannot
    open the browser among the other tests (one did)."""
    if item.path.is_relative_to(E2E_FOLDER) and item.get_closest_marker("e2e") is None:
        item.add_marker(pytest.mark.e2e)


def pytest_collection_modifyitems(config, items) -> None:
    """Browser tests go last.

    Playwright's sync API keeps an event loop running in the test thread for as long as the
    session-wide browser is open; any test after it that calls ``async_to_sync`` would fail.
    Under pytest-xdist the files go out to the workers in this order (``--dist loadfile
    --no-loadscope-reorder``, pyproject.toml), so a worker that opened the browser is given
    only browser tests after it.
    """
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)


def pytest_sessionstart(session) -> None:
    """Before collection, which imports the ASGI application: whitenoise warns when it starts
    without STATIC_ROOT, as in a fresh clone or an xdist worker's own var folder
    (tests/early_env.py) until a test collects the static files."""
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    session.stash[_DATABASE_NAMES] = {
        alias: config["NAME"] for alias, config in settings.DATABASES.items()
    }


_DATABASE_NAMES = pytest.StashKey[dict[str, str]]()


@pytest.fixture(autouse=True)
def _default_language():
    """Each test starts and ends in the site's default language. A request through the test
    client leaves the language it negotiated active in the test's thread (LocaleMiddleware
    activates it; nothing deactivates it), so a Chinese page in one test would otherwise
    turn the next test's refusals Chinese, depending on which tests share a process."""
    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _private_celery_queue(request):
    """A test with no worker sends its tasks to its folder's queue, emptied when it ends.

    The session's worker (tests/processes.py) takes tasks during ``live_stack`` tests only;
    a task another test left on the session's queue would run then, against another test's
    data. Tests with a worker send to the session's queue, which their workers read.
    """
    if WORKER_FIXTURES & set(request.fixturenames):
        yield
        return
    with private_queue(folder_queue(request.node.path)):
        yield


@pytest.fixture(scope="session", autouse=True)
def _flush_deletes_and_is_retried_on_deadlock():
    """A ``transaction=True`` test's closing flush deletes the rows on PostgreSQL rather than
    truncating every table, and is run again if it deadlocks with the session's worker
    (tests/flushed_database.py)."""
    flush = BaseDatabaseOperations.execute_sql_flush
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BaseDatabaseOperations, "execute_sql_flush", flush_retried_on_deadlock(flush))
        patch.setattr(
            PostgresOperations, "sql_flush", flushed_by_delete(PostgresOperations.sql_flush)
        )
        yield


@pytest.fixture(scope="session", autouse=True)
def _session_redis_keys_deleted_at_the_end():
    """Nothing the session kept in Redis outlives it (its names: tests/early_env.py)."""
    yield
    session_keys_delete()


@pytest.fixture
def make_user(db):
    def make(username: str | None = None, *, password: str = "pw-for-tests-1", **extra):
        User = get_user_model()
        return User.objects.create_user(
            username=username or f"user{next(_usernames)}", password=password, **extra
        )

    return make


@pytest.fixture
def user(make_user):
    return make_user("alice")


@pytest.fixture
def other_user(make_user):
    return make_user("bob")


def _needs_the_database(item: pytest.Item) -> bool:
    # The marker's database is asked for while the test sets up (pytest-django's
    # ``_django_db_marker``), so it is not among the fixtures the test names.
    fixtures = getattr(item, "fixturenames", ())
    return item.get_closest_marker("django_db") is not None or "django_db_setup" in fixtures


def _uses_the_database(request: pytest.FixtureRequest) -> bool:
    """Whether any test of the session needs the test database; if one does, it is set up.

    A session of tests that need none (``tests/react``, the engine's) then neither creates,
    migrates nor empties it: such a session is quicker, and ``make mutation`` checks the
    engine's mutants several at a time, which their sessions' database work would spoil.
    """
    if not any(_needs_the_database(item) for item in request.session.items):
        return False
    request.getfixturevalue("django_db_setup")
    return True


@pytest.fixture(scope="session", autouse=True)
def _reused_database_starts_empty(request, django_db_blocker):
    """A database kept by ``--reuse-db`` may hold the rows of a session that was stopped in
    the middle of a ``transaction=True`` test, before its closing flush: ``make mutation``
    stops a mutant's tests at its time limit. The next session would then find that test's
    user already there, and count a mutant as killed for it. Such a session starts by
    emptying the database, as a transactional test's end does."""
    if not _uses_the_database(request):
        return
    if request.config.getvalue("reuse_db") and not request.config.getvalue("create_db"):
        with django_db_blocker.unblock():
            call_command("flush", interactive=False, verbosity=0)


@pytest.fixture(scope="session", autouse=True)
def _release_test_database_at_the_end(request, django_db_blocker):
    """Let pytest-django drop the PostgreSQL test database when the session ends.

    Background threads in this process (a worker's monitor thread started by in-process
    run tests, the summariser) keep connections of their own that Django's teardown does
    not close; PostgreSQL refuses to drop a database anyone is still connected to.

    With ``--reuse-db`` the database is kept, so nothing is ended: mutmut runs several
    pytest sessions in one process (``make mutation``: the one that learns which tests reach
    which function, then the clean run), and the process loop's pool would find its
    connections ended under it in the next session. pytest-django then leaves the settings
    naming the test database, and the next session would make and use ``test_`` + that
    name while the loop's pool and the database threads stay connected to this one: the
    names are put back, so every session of the process uses the same test database.
    """
    if not _uses_the_database(request):
        yield
        return
    yield
    from django.db import connection, connections

    if request.config.getvalue("reuse_db") and not request.config.getvalue("create_db"):
        for alias, name in request.session.stash[_DATABASE_NAMES].items():
            settings.DATABASES[alias]["NAME"] = name
            connections[alias].settings_dict["NAME"] = name
        return
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
