from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.db.models.signals import post_migrate


def _seed_defaults(sender, using="default", **kwargs) -> None:
    from agents.services.defaults import ensure_defaults

    if using == "default":
        ensure_defaults()


def _close_sockets_of_the_session(sender, request, user, **kwargs) -> None:
    """Signing out closes the sockets this sign-in opened (docs/protocol.md, close 4401)."""
    from agents import events

    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        events.publish_signed_out(session_key)


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # After every migrate (and every test-database flush), so a fresh install can answer.
        post_migrate.connect(_seed_defaults, sender=self, dispatch_uid="agents.seed_defaults")
        from agents.preferences import load_on_sign_in

        user_logged_in.connect(load_on_sign_in, dispatch_uid="agents.preferences_on_sign_in")
        user_logged_out.connect(
            _close_sockets_of_the_session, dispatch_uid="agents.close_sockets_on_logout"
        )
