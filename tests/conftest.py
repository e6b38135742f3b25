"""Fixtures shared by every test folder. Each folder keeps its own in its conftest.py."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model

# Real celery worker / daphne processes for integration tests (documented in the module).
pytest_plugins = ["tests.processes"]

_usernames = itertools.count(1)


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
