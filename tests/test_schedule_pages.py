"""The schedules page and the notifications page: what they refuse, what they write, and that
nobody reaches another user's schedule."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.models import AgentProfile, AgentRun, Notification, Schedule, Webhook
from tests.driving import notified_at_its_end

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _plain_http_and_private_cache(settings):
    settings.SECURE_SSL_REDIRECT = False
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    caches = {name: dict(config) for name, config in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = f"test-schedule-pages-{uuid.uuid4().hex}"
    settings.CACHES = caches


@pytest.fixture
def profile(db) -> AgentProfile:
    return AgentProfile.objects.get(is_default=True)


def _form(profile: AgentProfile, **changes: str) -> dict[str, str]:
    tomorrow = (timezone.now() + timedelta(days=1)).date().isoformat()
    data = {
        "title": "Morning digest",
        "profile": str(profile.pk),
        "prompt": "What is on today?",
        "frequency": "weekdays",
        "day": tomorrow,
        "at": "08:00",
        "weekday": "0",
        "nth": "1",
        "time_zone": "Asia/Shanghai",
        "conversation_mode": "new",
        "budget_steps": "",
        "approval_expires_minutes": "",
    }
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("changes", "shown"),
    [
        ({"at": "25:00"}, "Enter a valid time."),
        ({"prompt": ""}, "This field is required."),
        ({"time_zone": "Nowhere/Else"}, "Unknown time zone"),
        ({"frequency": "once", "day": "2001-01-01"}, "That time has passed"),
    ],
)
def test_bad_input_is_refused_on_the_form_and_nothing_is_written(
    client, user, profile, changes, shown
):
    client.force_login(user)
    response = client.post(reverse("schedules"), _form(profile, **changes))
    assert response.status_code == 400
    assert shown in response.content.decode()
    assert not Schedule.objects.exists()
    # What was typed stays in the form.
    assert "Morning digest" in response.content.decode()


def test_a_schedule_is_created_described_run_paused_and_deleted(client, user, profile):
    client.force_login(user)
    response = client.post(reverse("schedules"), _form(profile), follow=True)
    assert response.status_code == 200
    schedule = Schedule.objects.get()
    assert schedule.rrule == "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"
    assert "Every weekday at 08:00 (Asia/Shanghai)" in response.content.decode()
    assert ", 8 a.m.</time>" in response.content.decode()  # the next firing, on its clock

    ran = client.post(reverse("schedule_action", args=[schedule.pk, "run"]), follow=True)
    run = AgentRun.objects.get(conversation__owner=user)
    assert "Started: Morning digest." in ran.content.decode()
    assert run.trigger_message.content == "What is on today?"

    client.post(reverse("schedule_action", args=[schedule.pk, "pause"]))
    schedule.refresh_from_db()
    assert schedule.is_paused
    client.post(reverse("schedule_action", args=[schedule.pk, "resume"]))
    schedule.refresh_from_db()
    assert not schedule.is_paused
    client.post(reverse("schedule_action", args=[schedule.pk, "delete"]))
    assert not Schedule.objects.exists()
    assert AgentRun.objects.filter(pk=run.pk).exists()  # its run and conversation stay


def test_the_page_is_in_chinese_for_a_chinese_reader(client, user, profile):
    client.force_login(user)
    client.post(reverse("schedules"), _form(profile, frequency="daily"))
    page = client.get(reverse("schedules"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "每天 08:00（Asia/Shanghai）" in page
    assert "立即运行" in page


def test_another_users_schedule_is_a_404(client, user, other_user, profile):
    client.force_login(user)
    client.post(reverse("schedules"), _form(profile))
    schedule = Schedule.objects.get()
    client.force_login(other_user)
    assert client.get(reverse("schedule_edit", args=[schedule.pk])).status_code == 404
    for action in ("run", "pause", "delete"):
        url = reverse("schedule_action", args=[schedule.pk, action])
        assert client.post(url).status_code == 404
    schedule.refresh_from_db()
    assert not schedule.is_paused
    assert not AgentRun.objects.exists()


def test_a_webhook_to_a_host_not_allowed_is_refused_clearly(client, user, settings):
    settings.WEBHOOK_ALLOW_HOSTS = []
    client.force_login(user)
    page = client.post(
        reverse("webhook_create"), {"url": "http://127.0.0.1:9/hook"}, follow=True
    ).content.decode()
    assert "A webhook URL must start with https://." in page
    assert not Webhook.objects.exists()


def test_a_notification_opens_its_run_and_is_read(client, user, profile):
    client.force_login(user)
    client.post(reverse("schedules"), _form(profile))
    client.post(reverse("schedule_action", args=[Schedule.objects.get().pk, "run"]))
    run = AgentRun.objects.get()
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.SUCCEEDED)
    notification = notified_at_its_end(run)
    assert notification is not None
    listed = client.get(reverse("notifications")).content.decode()
    assert "Morning digest" in listed
    opened = client.post(reverse("notification_open", args=[notification.pk]))
    assert opened.url == reverse("conversation", args=[run.conversation_id])
    assert Notification.objects.get().read_at is not None


def test_the_services_refusal_is_shown_beside_its_field(client, user, profile):
    client.force_login(user)

    response = client.post(reverse("schedules"), _form(profile, frequency="once", day="2001-01-01"))

    assert response.status_code == 400
    assert response.context["form"].errors["day"] == [
        "That time has passed: choose one still to come."
    ]
    assert not Schedule.objects.exists()
