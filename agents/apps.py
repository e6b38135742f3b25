from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _seed_defaults(sender, using="default", **kwargs) -> None:
    from agents.services.defaults import ensure_defaults

    if using == "default":
        ensure_defaults()


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # After every migrate (and every test-database flush), so a fresh install can answer.
        post_migrate.connect(_seed_defaults, sender=self, dispatch_uid="agents.seed_defaults")
