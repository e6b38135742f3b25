import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

app = Celery("chatsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
# agents.tasks holds the run tasks; agents.memory.tasks the summariser.
app.autodiscover_tasks(["agents", "agents.memory"])


@worker_ready.connect
def _freeze_startup_objects(**kwargs: object) -> None:
    # Everything the worker loaded lives as long as it does (chatsite/heap.py).
    from chatsite.heap import freeze_startup_objects

    freeze_startup_objects()
