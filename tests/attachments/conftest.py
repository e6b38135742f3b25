"""The attachments tests' fixtures (tests/attachments/storage.py)."""

from tests.attachments.storage import stored_before  # noqa: F401 (a fixture)
