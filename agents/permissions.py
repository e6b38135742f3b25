"""Who may do what, as named checks with safe defaults: the transports call these."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _

from agents.models import Conversation, Schedule


def signed_in_user(user: User | AnonymousUser) -> User:
    """The request's user once sign-in is required (``login_required``, DRF's
    ``IsAuthenticated``); an anonymous one here is refused, never passed on to a service."""
    if isinstance(user, AnonymousUser) or not user.is_authenticated:
        raise PermissionDenied(_("Sign in first."))
    return user


def can_read_conversation(user: User, conversation: Conversation) -> bool:
    """Its owner, and staff allowed to view conversations in the admin, may read one."""
    return conversation.owner_id == user.pk or user.has_perm("agents.view_conversation")


def can_watch_evaluation(user: User) -> bool:
    """Staff allowed to view evaluations in the admin may follow one's progress live."""
    return user.is_active and user.is_staff and user.has_perm("agents.view_evalrun")


def can_schedule_for(user: User, owner: User) -> bool:
    """A user schedules for themself; staff allowed to add schedules in the admin, for anyone.
    What the schedule may do stays its owner's (agents/services/schedules.py)."""
    if user.pk == owner.pk:
        return True
    return user.is_active and user.is_staff and user.has_perm("agents.add_schedule")


def can_change_schedule(user: User, schedule: Schedule) -> bool:
    """Its owner, and staff allowed to change schedules in the admin, may edit one."""
    if schedule.owner_id == user.pk:
        return True
    return user.is_active and user.is_staff and user.has_perm("agents.change_schedule")
