from django.apps import AppConfig
from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.db.models.signals import post_delete, post_migrate, post_save


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


def _close_sockets_on_password_change(sender, instance, created=False, **kwargs) -> None:
    """A new password ends every sign-in of the user made with the old one: their sockets
    close as at a sign-out, not only at their next write (``agents/session_check.py``).

    ``_password`` holds the new password from ``set_password`` until the save that stores
    it ends: this is that save. Only engines whose sessions can be listed (the database
    ones) are searched; a socket of another engine's session still closes at its next
    write."""
    if created or getattr(instance, "_password", None) is None:
        return
    if not settings.SESSION_ENGINE.startswith("django.contrib.sessions.backends.") or not (
        settings.SESSION_ENGINE.endswith(".db") or settings.SESSION_ENGINE.endswith(".cached_db")
    ):
        return
    from django.contrib.sessions.models import Session
    from django.utils import timezone

    from agents import events

    user_id = str(instance.pk)
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if session.get_decoded().get("_auth_user_id") == user_id:
            events.publish_signed_out(session.session_key)


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from django.core import checks

        from agents.sso import check_configuration

        checks.register(check_configuration)
        # After every migrate (and every test-database flush), so a fresh install can answer.
        post_migrate.connect(_seed_defaults, sender=self, dispatch_uid="agents.seed_defaults")
        from agents.preferences import load_on_sign_in

        user_logged_in.connect(load_on_sign_in, dispatch_uid="agents.preferences_on_sign_in")
        user_logged_out.connect(
            _close_sockets_of_the_session, dispatch_uid="agents.close_sockets_on_logout"
        )
        from agents.services.attachments import attachment_bytes_forget

        post_delete.connect(
            attachment_bytes_forget,
            sender="agents.Attachment",
            dispatch_uid="agents.attachment_bytes_forget",
        )
        post_save.connect(
            _close_sockets_on_password_change,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="agents.close_sockets_on_password_change",
        )
