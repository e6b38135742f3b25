"""The database settings a production server should not run without, as deploy checks
(``manage.py check --deploy``): fine while developing, a cliff under load."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

# Django's own PostgreSQL backend, and the project's (chosen with a pool, so never seen
# without one here: listed for a settings module that names it by hand).
_POSTGRESQL_ENGINES = ("django.db.backends.postgresql", "chatsite.server.db.postgres")


def check_connection_pool(**kwargs: Any) -> list[checks.CheckMessage]:
    """PostgreSQL without ``DATABASE_POOL_MAX_SIZE``: every idle database thread closes its
    connection, so a worker opens one for each run's set-up and another at its end, and
    PostgreSQL starts a backend each time (docs/deploy.md, "Database connections")."""
    return connection_pool_warnings(settings.DATABASES["default"])


def connection_pool_warnings(database: dict[str, Any]) -> list[checks.CheckMessage]:
    """``check_connection_pool`` of one entry of ``DATABASES``."""
    if database["ENGINE"] not in _POSTGRESQL_ENGINES or database.get("OPTIONS", {}).get("pool"):
        return []
    return [
        checks.Warning(
            "PostgreSQL without a connection pool: each process opens a new connection "
            "whenever a thread needs one after idling, a worker at least two for every run.",
            hint='Set DATABASE_POOL_MAX_SIZE (docs/deploy.md, "Database connections": '
            "its size, and the max_connections it needs).",
            id="chatsite.server.W001",
        )
    ]
