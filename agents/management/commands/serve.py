"""``manage.py serve``: the whole app in one command (daphne, a celery worker, celery beat, and
Redis if needed).

Children share one ``REDIS_URL``: the environment's, or an embedded Redis started here when
it is unset. A child that dies is started again, with backoff
(``chatsite/server/process/supervisor.py``), so a Celery worker that exits when Redis restarts
comes back by itself. Ctrl-C or SIGTERM stops every child.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from agents.services.defaults import ensure_defaults
from chatsite.server.process.supervisor import Child, Supervisor


class Command(BaseCommand):
    help = "Run daphne, a celery worker and celery beat (and Redis when REDIS_URL is unset)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Address daphne binds to.")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--concurrency",
            type=int,
            default=settings.CELERY_WORKER_CONCURRENCY,
            help="Runs one worker holds at once (threads).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        ensure_defaults()
        self._ensure_admin()
        with _redis() as redis_url:
            env = {**os.environ, "REDIS_URL": redis_url}
            supervisor = Supervisor(
                [
                    Child("daphne", [sys.executable, "-m", "chatsite.server.process.daphne",
                                     "-b", options["host"], "-p", str(options["port"]),
                                     "chatsite.asgi:application"], env),
                    Child("celery", [sys.executable, "-m", "celery", "-A", "chatsite", "worker",
                                     "-P", "threads", "-c", str(options["concurrency"]),
                                     "--loglevel=INFO"], env),
                    # Fires the schedules (settings.CELERY_BEAT_SCHEDULER reads its entries
                    # from the database); one per deployment, docs/deploy.md.
                    Child("beat", [sys.executable, "-m", "celery", "-A", "chatsite", "beat",
                                   "--loglevel=INFO"], env),
                ],
                log=self.stderr,
            )  # fmt: skip
            host = "localhost" if options["host"] in ("127.0.0.1", "0.0.0.0") else options["host"]  # noqa: S104
            self.stdout.write(f"chatsite is at http://{host}:{options['port']}/")
            self.stdout.write(_model_status())
            supervisor.run()

    def _ensure_admin(self) -> None:
        User = get_user_model()
        if User.objects.exists():
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "", password)
        self.stdout.write(
            self.style.WARNING(
                f"Created the first user: admin / {password}  (shown once; change it in /admin/)"
            )
        )


@contextlib.contextmanager
def _redis():
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    from chatsite.server.process.embedded import embedded_redis

    with embedded_redis() as url:
        print(f"REDIS_URL is unset: started an embedded Redis at {url}")
        yield url


def _model_status() -> str:
    from agents.llm.factory import OPENAI_DEFAULT_BASE_URL, is_demo_model
    from agents.services.defaults import default_profile

    model_config = default_profile().model_config
    if is_demo_model(model_config):
        return (
            "Model: the offline demo model is answering (set OPENAI_BASE_URL, or add a model "
            "endpoint in /admin/, for a real one)."
        )
    endpoint = model_config.base_url if model_config and model_config.base_url else None
    endpoint = endpoint or settings.OPENAI_BASE_URL or OPENAI_DEFAULT_BASE_URL
    return f"Model: {endpoint} (set in the admin or OPENAI_*)."
