"""Database connections: Django's backend, prepared cursors, and the event loop's pool."""
