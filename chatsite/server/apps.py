"""The server plumbing as a Django app: it has no models, only system checks, registered
here so that ``manage.py check`` runs them: those of ``chatsite/server/patches/``, and the
database settings' deploy check (``chatsite/server/db/checks.py``)."""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks


class ServerConfig(AppConfig):
    name = "chatsite.server"
    label = "server"
    verbose_name = "server plumbing"

    def ready(self) -> None:
        from chatsite.server.db.checks import check_connection_pool
        from chatsite.server.patches import (
            autobahn,
            channels,
            channels_redis,
            daphne,
            kombu,
            mcp,
            openai,
        )

        for patch in (autobahn, kombu, channels_redis, openai, mcp, daphne, channels):
            checks.register(patch.check)
        checks.register(check_connection_pool, deploy=True)
