"""``manage.py check --deploy`` is clean with the settings production runs with, and says
which of them is missing."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

from chatsite.server.db.checks import connection_pool_warnings

# Set by tests/processes.py or a developer's shell to run over plain http; production does
# not set them, so the check must see the defaults.
LOOSENERS = (
    "DJANGO_DEBUG",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "STATICFILES_BACKEND",
    "DJANGO_SECRET_KEY",
    "CHATSITE_TEST_FAST_HASHER",
    "DJANGO_ALLOW_ASYNC_UNSAFE",  # set by the browser tests while Playwright runs
)


def _check_deploy(**env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in LOOSENERS}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


# What docs/deploy.md's environment sets besides the database's address.
PRODUCTION = {"DJANGO_DEBUG": "0", "DATABASE_POOL_MAX_SIZE": "20"}


def test_check_deploy_is_clean_with_production_settings():
    result = _check_deploy(**PRODUCTION, DJANGO_SECRET_KEY=secrets.token_urlsafe(64))

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "System check identified no issues" in output
    assert "WARNING" not in output
    assert "security.W" not in output


def test_check_deploy_flags_a_debug_server():
    """The check is really looking: the same command with DEBUG on fails."""
    result = _check_deploy(
        **{**PRODUCTION, "DJANGO_DEBUG": "1"}, DJANGO_SECRET_KEY=secrets.token_urlsafe(64)
    )

    assert result.returncode != 0
    assert "security.W018" in result.stdout + result.stderr


def test_check_deploy_flags_postgresql_without_a_pool():
    """The same command with the pool left out fails on the pool's warning alone. The check
    reads settings and connects to nothing, so the database is named even where the suite
    runs on SQLite."""
    result = _check_deploy(
        **{**PRODUCTION, "DATABASE_POOL_MAX_SIZE": "0"},
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/chatsite_never_connected",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
    )

    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "chatsite.server.W001" in output
    assert "DATABASE_POOL_MAX_SIZE" in output
    assert "security.W" not in output


@pytest.mark.parametrize(
    ("database", "warned"),
    [
        ({"ENGINE": "django.db.backends.postgresql", "OPTIONS": {}}, True),
        ({"ENGINE": "django.db.backends.postgresql"}, True),
        ({"ENGINE": "django.db.backends.postgresql", "OPTIONS": {"pool": {"max_size": 20}}}, False),
        ({"ENGINE": "chatsite.server.db.postgres", "OPTIONS": {"pool": {"max_size": 20}}}, False),
        ({"ENGINE": "django.db.backends.sqlite3", "OPTIONS": {"timeout": 30}}, False),
    ],
)
def test_the_pool_check_reads_the_engine_and_its_pool(database, warned):
    found = [message.id for message in connection_pool_warnings({**database, "NAME": "chatsite"})]

    assert found == (["chatsite.server.W001"] if warned else [])
