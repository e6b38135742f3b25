import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

app = Celery("chatsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
# agents.tasks holds the run tasks; agents.memory.tasks the summariser.
app.autodiscover_tasks(["agents", "agents.memory"])
