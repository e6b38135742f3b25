"""``manage.py check --deploy`` is clean with the settings production runs with."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

from django.conf import settings

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


def test_check_deploy_is_clean_with_production_settings():
    result = _check_deploy(DJANGO_DEBUG="0", DJANGO_SECRET_KEY=secrets.token_urlsafe(64))

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "System check identified no issues" in output
    assert "WARNING" not in output
    assert "security.W" not in output


def test_check_deploy_flags_a_debug_server():
    """The check is really looking: the same command with DEBUG on fails."""
    result = _check_deploy(DJANGO_DEBUG="1", DJANGO_SECRET_KEY=secrets.token_urlsafe(64))

    assert result.returncode != 0
    assert "security.W018" in result.stdout + result.stderr
