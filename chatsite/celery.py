import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

app = Celery("chatsite")
# Celery reads its settings on every task it sends or runs, trying each name in two spellings
# before its defaults: read through Django's lazy settings, every miss raised and caught an
# AttributeError at every `.delay()` (docs/performance.md#broker). It reads a
# snapshot of the CELERY_ settings instead, taken when it first needs them (after Django's
# settings are loaded).
app.config_from_object("chatsite.celery:celery_settings", namespace="CELERY")
# agents.tasks holds the run tasks; agents.memory.tasks the summariser.
app.autodiscover_tasks(["agents", "agents.memory"])


def __getattr__(name: str) -> dict[str, object]:
    # ``chatsite.celery:celery_settings``, computed when Celery first reads it.
    if name == "celery_settings":
        from django.conf import settings

        return {key: getattr(settings, key) for key in dir(settings) if key.startswith("CELERY_")}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@worker_ready.connect
def _freeze_startup_objects(**kwargs: object) -> None:
    # Everything the worker loaded lives as long as it does (chatsite/server/process/heap.py).
    from chatsite.server.process.heap import freeze_startup_objects

    freeze_startup_objects()
