"""Fixtures shared by every test folder. Each folder keeps its own in its conftest.py."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model

# Real celery worker / daphne processes for integration tests (documented in the module).
pytest_plugins = ["tests.processes"]

_usernames = itertools.count(1)


def pytest_collection_modifyitems(config, items) -> None:
    """Browser tests go last.

    Playwright's sync API keeps an event loop running in the test thread for as long as the
    session-wide browser is open; any test after it that calls ``async_to_sync`` would fail.
    """
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)


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
