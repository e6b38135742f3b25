"""A pytest plugin loaded with ``-p`` (pyproject.toml), before pytest-django reads settings.

Environment set here is seen by Django's settings and inherited by the worker and daphne
processes that integration tests start.
"""

import os

# PBKDF2's deliberate slowness would otherwise dominate the suite (chatsite/settings.py).
os.environ.setdefault("CHATSITE_TEST_FAST_HASHER", "1")

# The suite talks plain http to its own test client, daphne and browser. Production keeps
# these on (they default to on with DEBUG off); tests/security/test_deploy_checks.py checks
# the production settings in a process of its own.
for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
    os.environ.setdefault(name, "0")
