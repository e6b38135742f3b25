"""A pytest plugin loaded with ``-p`` (pyproject.toml), before pytest-django reads settings.

Environment set here is seen by Django's settings and inherited by the worker and daphne
processes that integration tests start.
"""

import os

# PBKDF2's deliberate slowness would otherwise dominate the suite (chatsite/settings.py).
os.environ.setdefault("CHATSITE_TEST_FAST_HASHER", "1")
