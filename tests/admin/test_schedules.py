"""Staff schedule a prompt for a user in the admin: with the add (or change) permission,
through the schedules service, so what the schedule may do is the owner's (their agents,
their number of schedules) and its firings run as the owner. Staff without the permission
and signed-in non-staff users change nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone

from agents.models import AgentProfile, AgentRun, Schedule
from agents.services.schedules import ScheduleFields, schedule_create, schedules_fire_due

pytestmark = pytest.mark.django_db


def _staff(make_user, *codenames: str):
    member = make_user("scheduler", is_staff=True)
    member.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return member


@pytest.fixture
def agent(db):
    return AgentProfile.objects.create(name="Digest writer", slug="digest-writer")


def _form(owner, profile: AgentProfile, **changes) -> dict:
    tomorrow = (timezone.localtime() + timedelta(days=1)).date()
    data = {
        "owner": str(owner.pk),
        "profile": str(profile.pk),
        "title": "Morning digest",
        "prompt": "Summarise the news.",
        "rrule": "FREQ=DAILY",
        "starts_at_0": tomorrow.isoformat(),
        "starts_at_1": "08:00:00",
        "time_zone": "Asia/Tokyo",
        "conversation_mode": "new",
        "budget_steps": "",
        "approval_expires_after": "",
    }
    data.update(changes)
    return data


def test_staff_schedule_for_a_user_and_the_firing_runs_as_that_user(client, make_user, user, agent):
    staff = _staff(make_user, "add_schedule")
    client.force_login(staff)
    assert client.get(reverse("admin:agents_schedule_add")).status_code == 200

    response = client.post(reverse("admin:agents_schedule_add"), _form(user, agent))

    assert response.status_code == 302, response.content.decode()[:3000]
    schedule = Schedule.objects.get()
    assert (schedule.owner, schedule.created_by) == (user, staff)
    # Eight in the morning on the clock of Tokyo, whatever the staff member's own zone.
    local = timezone.localtime(schedule.starts_at, timezone=timezone.get_fixed_timezone(540))
    assert (local.hour, local.minute) == (8, 0)

    assert schedules_fire_due(now=schedule.next_fire_at)
    run = AgentRun.objects.select_related("conversation").get()
    assert run.conversation.owner == user
    assert run.trigger_message.content == "Summarise the news."


def test_an_agent_the_owner_may_not_use_is_refused_though_staff_may(client, make_user, user, agent):
    insiders = Group.objects.create(name="insiders")
    agent.allowed_groups.add(insiders)
    staff = _staff(make_user, "add_schedule")
    staff.groups.add(insiders)
    client.force_login(staff)

    response = client.post(reverse("admin:agents_schedule_add"), _form(user, agent))

    assert response.status_code == 200
    assert "alice may not use that agent." in response.context["adminform"].form.errors["profile"]
    assert not Schedule.objects.exists()


def test_the_owners_number_of_schedules_applies(client, make_user, user, agent, settings):
    settings.SCHEDULES_PER_USER = 0
    client.force_login(_staff(make_user, "add_schedule"))

    response = client.post(reverse("admin:agents_schedule_add"), _form(user, agent))

    assert response.status_code == 200
    assert "alice has as many schedules" in str(response.context["adminform"].form.errors)
    assert not Schedule.objects.exists()


def test_a_bad_rule_is_shown_beside_its_field(client, make_user, user, agent):
    client.force_login(_staff(make_user, "add_schedule"))

    response = client.post(
        reverse("admin:agents_schedule_add"), _form(user, agent, rrule="FREQ=MINUTELY")
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["rrule"] == [
        "A schedule runs at most once an hour."
    ]
    assert not Schedule.objects.exists()


def test_staff_without_the_permission_cannot_schedule_for_anyone(client, make_user, user, agent):
    client.force_login(_staff(make_user, "view_schedule"))

    assert client.get(reverse("admin:agents_schedule_add")).status_code == 403
    response = client.post(reverse("admin:agents_schedule_add"), _form(user, agent))

    assert response.status_code == 403
    assert not Schedule.objects.exists()


def test_a_non_staff_user_is_sent_to_the_login(client, make_user, user, agent):
    client.force_login(make_user("mallory"))

    response = client.post(reverse("admin:agents_schedule_add"), _form(user, agent))

    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]
    assert not Schedule.objects.exists()


def _users_schedule(user, agent) -> Schedule:
    fields = ScheduleFields(
        profile=agent,
        title="Theirs",
        prompt="Their question.",
        rule="FREQ=DAILY",
        starts_at=timezone.now() + timedelta(hours=1),
        time_zone="Asia/Tokyo",
    )
    return schedule_create(owner=user, fields=fields)


def test_staff_with_the_change_permission_edit_a_users_schedule(client, make_user, user, agent):
    schedule = _users_schedule(user, agent)
    local = schedule.starts_at.astimezone(timezone.get_fixed_timezone(540))
    client.force_login(_staff(make_user, "change_schedule"))
    url = reverse("admin:agents_schedule_change", args=[schedule.pk])
    page = client.get(url)
    form = page.context["adminform"].form
    assert "owner" not in form.fields
    data = {
        name: form[name].value() if form[name].value() is not None else ""
        for name in form.fields
        if name != "starts_at"
    }
    data.update(
        prompt="Only the headlines.",
        starts_at_0=local.date().isoformat(),
        starts_at_1=local.strftime("%H:%M:%S"),
        **{
            "firings-TOTAL_FORMS": "0",
            "firings-INITIAL_FORMS": "0",
            "firings-MIN_NUM_FORMS": "0",
            "firings-MAX_NUM_FORMS": "0",
        },
    )

    response = client.post(url, data)

    assert response.status_code == 302, response.content.decode()[:3000]
    schedule.refresh_from_db()
    assert schedule.prompt == "Only the headlines."
    assert schedule.owner == user
    assert schedule.created_by == user
    # Shown and read back on the clock of Tokyo: the first time has not moved.
    assert abs(schedule.starts_at - local) < timedelta(seconds=1)


def test_staff_without_the_change_permission_only_see_it(client, make_user, user, agent):
    schedule = _users_schedule(user, agent)
    client.force_login(_staff(make_user))
    url = reverse("admin:agents_schedule_change", args=[schedule.pk])

    assert client.get(url).status_code == 200
    response = client.post(url, {"prompt": "Changed."})

    assert response.status_code == 403
    schedule.refresh_from_db()
    assert schedule.prompt == "Their question."
