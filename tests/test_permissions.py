"""agents/permissions.py: who may do what, with the safe answer by default."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, Permission
from django.core.exceptions import PermissionDenied

from agents.models import Schedule
from agents.permissions import (
    can_change_schedule,
    can_read_conversation,
    can_schedule_for,
    signed_in_user,
)
from agents.services.conversations import conversation_create

pytestmark = pytest.mark.django_db


def test_an_anonymous_visitor_is_refused_with_a_reason():
    with pytest.raises(PermissionDenied) as refused:
        signed_in_user(AnonymousUser())
    assert str(refused.value) == "Sign in first."


def test_a_signed_in_user_is_passed_on(user):
    assert signed_in_user(user) is user


def test_only_the_owner_and_staff_allowed_to_view_conversations_may_read_one(
    user, other_user, make_user
):
    conversation = conversation_create(owner=user)
    staff_without = make_user("staff-without", is_staff=True)
    staff_with = make_user("staff-with", is_staff=True)
    staff_with.user_permissions.add(Permission.objects.get(codename="view_conversation"))

    assert can_read_conversation(user, conversation)
    assert not can_read_conversation(other_user, conversation)
    assert not can_read_conversation(staff_without, conversation)
    assert can_read_conversation(staff_with, conversation)


# Who may act on a user's schedules: the user, and active staff the admin allows to. Each
# check is asked whether ``someone`` may, for a schedule (or a new one) of ``owner``.
SCHEDULE_CHECKS = {
    "change one": (
        lambda someone, owner: can_change_schedule(someone, Schedule(owner=owner)),
        "change_schedule",
    ),
    "schedule for them": (can_schedule_for, "add_schedule"),
}


@pytest.mark.parametrize("action", SCHEDULE_CHECKS)
def test_only_the_owner_and_active_staff_the_admin_allows_may_act_on_a_schedule(
    action, user, other_user, make_user
):
    may, codename = SCHEDULE_CHECKS[action]
    allowed = Permission.objects.get(codename=codename)
    staff_with = make_user("staff-with", is_staff=True)
    staff_with.user_permissions.add(allowed)
    staff_without = make_user("staff-without", is_staff=True)
    allowed_but_not_staff = make_user("not-staff")
    allowed_but_not_staff.user_permissions.add(allowed)
    superuser_gone = make_user("gone", is_staff=True, is_superuser=True, is_active=False)

    assert may(user, user)
    assert may(staff_with, user)
    assert not may(other_user, user)
    assert not may(staff_without, user)
    assert not may(allowed_but_not_staff, user)
    assert not may(superuser_gone, user)
