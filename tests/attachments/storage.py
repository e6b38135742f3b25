"""What the attachments' storage holds, and a fixture that removes what a test stored: rows
go with the test's rollback or flush (a flush truncates, so no delete signal runs), the bytes
would stay in the session's var/ folder."""

from __future__ import annotations

import pytest

from agents.models import Attachment


def storage():
    return Attachment._meta.get_field("file").storage


def stored_names() -> set[str]:
    files = storage()
    names: set[str] = set()
    if not files.exists("attachments"):
        return names
    for owner in files.listdir("attachments")[0]:
        folder = f"attachments/{owner}"
        names.update(f"{folder}/{name}" for name in files.listdir(folder)[1])
    return names


@pytest.fixture
def stored_before():
    """The stored names before the test; the test's own are deleted after it."""
    before = stored_names()
    yield before
    for name in stored_names() - before:
        storage().delete(name)
