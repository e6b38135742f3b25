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


def test_only_the_owner_and_active_staff_allowed_to_change_schedules_may_edit_one(
    user, other_user, make_user
):
    schedule = Schedule(owner=user)
    change = Permission.objects.get(codename="change_schedule")
    staff_with = make_user("staff-with", is_staff=True)
    staff_with.user_permissions.add(change)
    staff_without = make_user("staff-without", is_staff=True)
    allowed_but_not_staff = make_user("not-staff")
    allowed_but_not_staff.user_permissions.add(change)
    superuser_gone = make_user("gone", is_staff=True, is_superuser=True, is_active=False)

    assert can_change_schedule(user, schedule)
    assert can_change_schedule(staff_with, schedule)
    assert not can_change_schedule(other_user, schedule)
    assert not can_change_schedule(staff_without, schedule)
    assert not can_change_schedule(allowed_but_not_staff, schedule)
    assert not can_change_schedule(superuser_gone, schedule)


def test_a_user_schedules_for_themself_and_only_active_staff_allowed_to_add_for_others(
    user, other_user, make_user
):
    add = Permission.objects.get(codename="add_schedule")
    staff_with = make_user("staff-with", is_staff=True)
    staff_with.user_permissions.add(add)
    staff_without = make_user("staff-without", is_staff=True)
    allowed_but_not_staff = make_user("not-staff")
    allowed_but_not_staff.user_permissions.add(add)
    superuser_gone = make_user("gone", is_staff=True, is_superuser=True, is_active=False)

    assert can_schedule_for(user, user)
    assert can_schedule_for(staff_with, user)
    assert not can_schedule_for(other_user, user)
    assert not can_schedule_for(staff_without, user)
    assert not can_schedule_for(allowed_but_not_staff, user)
    assert not can_schedule_for(superuser_gone, user)
