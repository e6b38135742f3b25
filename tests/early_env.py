"""A pytest plugin loaded with ``-p`` (pyproject.toml), before pytest-django reads settings.

Environment set here is seen by Django's settings and inherited by the worker and daphne
processes that integration tests start.
"""

import os
import uuid
from pathlib import Path

# PBKDF2's deliberate slowness would otherwise dominate the suite (chatsite/settings.py).
os.environ.setdefault("CHATSITE_TEST_FAST_HASHER", "1")

# The suite talks plain http to its own test client, daphne and browser. Production keeps
# these on (they default to on with DEBUG off); tests/security/test_deploy_checks.py checks
# the production settings in a process of its own.
for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
    os.environ.setdefault(name, "0")

# Pages rendered through the test client name their static files; nothing was collected, so
# they are served unhashed. The browser tests collect with production's storage themselves
# (tests/e2e/conftest.py) and give their daphne the setting it needs.
os.environ.setdefault(
    "STATICFILES_BACKEND", "django.contrib.staticfiles.storage.StaticFilesStorage"
)

# The MCP servers tests start listen on loopback, which the SSRF guard refuses unless it is
# allowed (tests/mcp/test_mcp_ssrf.py checks the guard with the list emptied).
os.environ.setdefault("CHAT_MCP_ALLOW_HOSTS", "127.0.0.1")
# Likewise the webhook receivers of tests/integration/test_schedules.py (http:// is allowed
# only for hosts in this list; tests/services/test_schedules.py checks it emptied).
os.environ.setdefault("WEBHOOK_ALLOW_HOSTS", "127.0.0.1")


def session_redis_names(session: str) -> dict[str, str]:
    """The settings that put everything a test session keeps in Redis under its own name.

    Two suites on one Redis (two worktrees, CI beside a developer) then share nothing: not
    the channel layer's groups, not the cache's rate-limit counters, not Celery's queue.
    """
    return {
        "CHATSITE_TEST_SESSION": session,
        "CHANNELS_PREFIX": f"{session}-channels",
        "CACHE_PREFIX": f"{session}-cache",
        "CELERY_KEY_PREFIX": f"{session}-celery:",
        # The queue the session's workers read; tests without a worker use one of their
        # folder's (tests/conftest.py), so no worker ever runs a task they left behind.
        "CELERY_TASK_DEFAULT_QUEUE": f"{session}-runs",
    }


# Always a new one: a session never inherits another's names, not even its parent's.
os.environ.update(session_redis_names(f"chatsite-test-{uuid.uuid4().hex[:12]}"))


def worker_var_dir(worker: str, var_dir: Path) -> Path:
    """The folder of files an xdist worker keeps apart from its siblings, inside ``var_dir``.

    Each worker of ``pytest -n`` is a session of its own: its test database (pytest-django
    adds the worker's id to the name) and its Redis names (above) are its own, and so are its
    files: the static files the browser tests collect (a sibling's collect rewrites the
    manifest under its daphne), the SQLite test database, uploads and the secret key.
    """
    own = f"xdist-{worker}"
    return var_dir if var_dir.name == own else var_dir / own


# pytest-xdist names the worker in the environment before it loads any plugin; the
# processes a worker starts inherit the folder through ``CHATSITE_VAR_DIR``.
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    default_var_dir = Path(__file__).resolve().parent.parent / "var"  # chatsite/settings.py's
    os.environ["CHATSITE_VAR_DIR"] = str(
        worker_var_dir(worker, Path(os.environ.get("CHATSITE_VAR_DIR") or default_var_dir))
    )
