"""The ways a sign-in ends, for the tests of sockets and of the session checks."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

# Each ends every session of the user; "logout" ends the one its client signed in with.
ENDINGS = ("logout", "session deleted", "session expired", "password changed", "user deactivated")


def end_sign_in(ended_by: str, *, user, client: Client | None = None) -> None:
    if ended_by == "logout":
        assert client is not None, "a logout needs the client that signed in"
        client.logout()
    elif ended_by == "session deleted":
        Session.objects.all().delete()
    elif ended_by == "session expired":
        Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    elif ended_by == "password changed":
        user.set_password("a-new-password-1")
        user.save()
    elif ended_by == "user deactivated":
        user.is_active = False
        user.save()
    else:
        raise ValueError(f"no such ending: {ended_by!r}")
