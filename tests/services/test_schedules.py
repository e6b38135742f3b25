"""Schedules, their firings and notifications, in this process (no beat, no worker): what is
refused, how a firing stays one, how failures pause a schedule, and a scheduled run's own
approval expiry and step budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import PermissionDenied
from django.utils import timezone, translation

from agents.llm.scripted import Reply
from agents.models import (
    AgentProfile,
    AgentRun,
    Notification,
    Schedule,
    ScheduleFiring,
    ToolApproval,
    Webhook,
    WebhookDelivery,
)
from agents.protocol import RefusalCode, RequestRefused
from agents.recurrence import describe, next_occurrence
from agents.selectors import firing_budget_steps
from agents.services.approvals import approvals_expire
from agents.services.notifications import notifications_mark_read
from agents.services.schedules import (
    ScheduleFields,
    schedule_create,
    schedule_run_now,
    schedule_update,
    schedules_fire_due,
)
from agents.services.webhooks import webhook_create
from tests.driving import notified_at_its_end

pytestmark = pytest.mark.django_db


def _fields(profile: AgentProfile, **changes) -> ScheduleFields:
    values = {
        "profile": profile,
        "title": "Digest",
        "prompt": "Summarise my day.",
        "rule": "FREQ=DAILY",
        "starts_at": timezone.now() + timedelta(hours=1),
        "time_zone": "Europe/Paris",
    }
    values.update(changes)
    return ScheduleFields(**values)


@pytest.mark.parametrize(
    ("changes", "code", "words"),
    [
        ({"prompt": "   "}, RefusalCode.INVALID_SCHEDULE, "prompt is empty"),
        (
            {"rule": "", "starts_at": datetime(2001, 1, 1, tzinfo=UTC)},
            RefusalCode.INVALID_SCHEDULE,
            "has passed",
        ),
        ({"time_zone": "Mars/Olympus"}, RefusalCode.INVALID_SCHEDULE, "Unknown time zone"),
        ({"rule": "FREQ=MINUTELY"}, RefusalCode.INVALID_SCHEDULE, "once an hour"),
        ({"rule": "FREQ=SOMETIMES"}, RefusalCode.INVALID_SCHEDULE, "not valid"),
        ({"budget_steps": 0}, RefusalCode.INVALID_SCHEDULE, "at least 1"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(user, default_profile, changes, code, words):
    with pytest.raises(RequestRefused) as refused:
        schedule_create(owner=user, fields=_fields(default_profile, **changes))
    assert refused.value.code == code
    assert words in refused.value.message
    assert not Schedule.objects.exists()


def test_a_profile_the_user_may_not_use_is_refused(user, default_profile):
    staff_only = AgentProfile.objects.create(name="Staff only", slug="staff-only")
    staff_only.allowed_groups.add(Group.objects.create(name="staff"))
    with pytest.raises(RequestRefused) as refused:
        schedule_create(owner=user, fields=_fields(staff_only))
    assert refused.value.code == RefusalCode.PROFILE_NOT_ALLOWED
    assert not Schedule.objects.exists()


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:9/hook", "https://"),
        ("https://10.1.2.3/hook", "private address"),
        ("https://169.254.169.254/latest", "metadata"),
        ("not a url", "https://"),
    ],
)
def test_a_webhook_url_to_a_host_not_allowed_is_refused(user, settings, url, words):
    settings.WEBHOOK_ALLOW_HOSTS = []
    with pytest.raises(RequestRefused) as refused:
        webhook_create(owner=user, url=url)
    assert refused.value.code in (RefusalCode.WEBHOOK_URL_REFUSED,)
    assert words in refused.value.message
    assert not Webhook.objects.exists()


def test_http_is_allowed_only_for_a_host_of_the_allow_list(user, settings):
    settings.WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    created = webhook_create(owner=user, url="http://127.0.0.1:9/hook")
    assert created.webhook.get_secret() == created.secret
    assert len(created.secret) >= 32


def test_a_beat_that_was_down_fires_the_latest_missed_occurrence_once(user, default_profile):
    start = (timezone.now() - timedelta(hours=5)).replace(microsecond=0)
    schedule = schedule_create(
        owner=user, fields=_fields(default_profile, rule="FREQ=HOURLY", starts_at=start)
    )
    # As if beat had been down for three hours: three occurrences are due.
    Schedule.objects.filter(pk=schedule.pk).update(next_fire_at=start + timedelta(hours=3))
    now = start + timedelta(hours=5, minutes=30)

    fired = schedules_fire_due(now=now)
    again = schedules_fire_due(now=now)

    assert len(fired) == 1
    assert again == []
    firing = ScheduleFiring.objects.get(pk=fired[0])
    assert firing.occurrence == start + timedelta(hours=5)
    assert firing.run is not None
    schedule.refresh_from_db()
    assert schedule.next_fire_at == start + timedelta(hours=6)


def test_run_now_fires_each_time_and_keeps_the_next_occurrence(user, default_profile):
    schedule = schedule_create(owner=user, fields=_fields(default_profile))
    upcoming = schedule.next_fire_at
    first = schedule_run_now(schedule=schedule, user=user)
    assert first.run is not None
    first.run.status = AgentRun.Status.SUCCEEDED
    first.run.save(update_fields=["status"])
    second = schedule_run_now(schedule=schedule, user=user)
    assert second.run is not None
    assert first.run.conversation_id != second.run.conversation_id  # a new one each time
    schedule.refresh_from_db()
    assert schedule.next_fire_at == upcoming


def test_failures_in_a_row_pause_the_schedule_and_say_why(user, default_profile, settings):
    settings.SCHEDULE_MAX_FAILURES_IN_A_ROW = 2
    schedule = schedule_create(
        owner=user,
        fields=_fields(default_profile, conversation_mode=Schedule.ConversationMode.APPEND),
    )
    first = schedule_run_now(schedule=schedule, user=user)
    assert first.run is not None  # queued, and nobody runs it: the next sends are refused
    refused = [schedule_run_now(schedule=schedule, user=user) for _ in range(2)]

    assert all(firing.run is None and firing.error for firing in refused)
    schedule.refresh_from_db()
    assert schedule.is_paused
    assert "2 failures in a row" in schedule.paused_reason
    paused = Notification.objects.get(kind=Notification.Kind.SCHEDULE_PAUSED)
    assert paused.schedule == schedule
    assert paused.detail == schedule.paused_reason
    # A paused schedule is not fired by beat, even when due.
    Schedule.objects.filter(pk=schedule.pk).update(next_fire_at=timezone.now())
    assert schedules_fire_due() == []


def test_a_scheduled_call_waiting_for_approval_expires_at_the_schedules_time(user, default_profile):
    schedule = schedule_create(
        owner=user, fields=_fields(default_profile, approval_expires_after=60, budget_steps=3)
    )
    run = schedule_run_now(schedule=schedule, user=user).run
    assert run is not None
    assert firing_budget_steps(run_id=run.pk) == 3
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.AWAITING_APPROVAL)
    waiting = ToolApproval.objects.create(
        run=run, call_id="call-1", tool="send_mail", requested_at=timezone.now()
    )
    assert approvals_expire() == []
    ToolApproval.objects.filter(pk=waiting.pk).update(
        requested_at=timezone.now() - timedelta(seconds=61)
    )
    assert approvals_expire() == [waiting.pk]
    waiting.refresh_from_db()
    assert waiting.decision == ToolApproval.Decision.EXPIRED


def test_a_runs_end_is_notified_once_and_queues_the_webhooks(user, default_profile, settings):
    settings.WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    hook = webhook_create(owner=user, url="http://127.0.0.1:9/hook").webhook
    schedule = schedule_create(owner=user, fields=_fields(default_profile))
    run = schedule_run_now(schedule=schedule, user=user).run
    assert run is not None
    assert notified_at_its_end(run) is None  # still queued
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.FAILED, error_message="No.")

    first = notified_at_its_end(run)
    second = notified_at_its_end(run)

    assert first is not None
    assert second is None
    assert first.kind == Notification.Kind.FAILED
    assert first.detail == "No."
    assert first.schedule == schedule
    assert WebhookDelivery.objects.get().webhook == hook
    assert notifications_mark_read(user=user) == 1
    assert notifications_mark_read(user=user) == 0


def test_a_cancelled_run_is_not_notified(user, default_profile):
    schedule = schedule_create(owner=user, fields=_fields(default_profile))
    run = schedule_run_now(schedule=schedule, user=user).run
    assert run is not None
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.CANCELLED)
    assert notified_at_its_end(run) is None


def test_daily_at_eight_stays_at_eight_across_a_daylight_saving_change():
    start = datetime(2026, 3, 27, 8, 0, tzinfo=UTC).replace(tzinfo=None)
    from zoneinfo import ZoneInfo

    paris = ZoneInfo("Europe/Paris")
    starts_at = start.replace(tzinfo=paris)
    after = next_occurrence(
        rule="FREQ=DAILY",
        starts_at=starts_at,
        time_zone="Europe/Paris",
        after=datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
    )
    assert after is not None
    assert after.astimezone(paris).hour == 8
    assert after.astimezone(UTC).hour == 6  # summer time: UTC+2


@pytest.mark.parametrize(
    ("rule", "english", "chinese"),
    [
        ("FREQ=DAILY", "Every day at 08:00 (Asia/Shanghai)", "每天 08:00（Asia/Shanghai）"),
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "Every weekday at 08:00", "每个工作日 08:00"),
        (
            "FREQ=MONTHLY;BYDAY=1MO",
            "Every first Monday of the month at 08:00",
            "每月第一个星期一 08:00",
        ),
        ("FREQ=WEEKLY;BYDAY=SU", "Every Sunday at 08:00", "每星期日 08:00"),
    ],
)
def test_a_rule_in_words_in_english_and_chinese(rule, english, chinese):
    from zoneinfo import ZoneInfo

    starts_at = datetime(2026, 6, 1, 8, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    with translation.override("en"):
        assert describe(rule=rule, starts_at=starts_at, time_zone="Asia/Shanghai").startswith(
            english
        )
    with translation.override("zh-hans"):
        assert describe(rule=rule, starts_at=starts_at, time_zone="Asia/Shanghai").startswith(
            chinese
        )


class _Answers:
    """A loopback receiver answering each POST with the next status of ``statuses``."""

    def __init__(self, statuses: list[int]) -> None:
        import http.server
        import threading

        self.statuses = statuses
        self.bodies: list[tuple[dict[str, str], bytes]] = []
        answers = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                answers.bodies.append((dict(self.headers), body))
                self.send_response(answers.statuses.pop(0))
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _failed_run_notification(user, profile) -> Notification:
    schedule = schedule_create(owner=user, fields=_fields(profile))
    run = schedule_run_now(schedule=schedule, user=user).run
    assert run is not None
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.FAILED)
    notification = notified_at_its_end(run)
    assert notification is not None
    return notification


def test_a_delivery_that_failed_is_tried_again_and_signed_each_time(
    user, default_profile, settings
):
    import hashlib
    import hmac

    from agents.services.webhooks import DeliveryFailed, webhook_deliver

    settings.WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    receiver = _Answers([503, 204])
    try:
        hook = webhook_create(owner=user, url=receiver.url)
        _failed_run_notification(user, default_profile)
        delivery = WebhookDelivery.objects.get()

        with pytest.raises(DeliveryFailed):
            webhook_deliver(delivery_id=delivery.pk)
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.response_status) == (
            WebhookDelivery.Status.PENDING,
            1,
            503,
        )
        assert webhook_deliver(delivery_id=delivery.pk) is True
        assert webhook_deliver(delivery_id=delivery.pk) is True  # a redelivered task: no POST
    finally:
        receiver.close()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (WebhookDelivery.Status.DELIVERED, 2)
    assert len(receiver.bodies) == 2
    for headers, body in receiver.bodies:
        signed = headers["X-Chatsite-Timestamp"].encode() + b"." + body
        digest = hmac.new(hook.secret.encode(), signed, hashlib.sha256).hexdigest()
        assert headers["X-Chatsite-Signature"] == f"sha256={digest}"


def test_a_delivery_to_a_url_now_refused_fails_without_sending(user, default_profile, settings):
    from agents.services.webhooks import webhook_deliver

    settings.WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    receiver = _Answers([204])
    try:
        webhook_create(owner=user, url=receiver.url)
        _failed_run_notification(user, default_profile)
        settings.WEBHOOK_ALLOW_HOSTS = []
        delivery = WebhookDelivery.objects.get()
        assert webhook_deliver(delivery_id=delivery.pk) is False
    finally:
        receiver.close()
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.FAILED
    assert "https://" in delivery.error
    assert receiver.bodies == []


def test_a_notification_is_e_mailed_in_its_readers_language_when_asked(
    user, default_profile, settings, mailoutbox
):
    from agents.models import UserPreference
    from agents.services.notifications import (
        notification_email_send,
        notification_preference_set,
    )

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    user.email = "alice@example.com"
    user.save()
    UserPreference.objects.create(user=user, language="zh-hans")
    notification = _failed_run_notification(user, default_profile)
    assert notification_email_send(notification_id=notification.pk) is False  # not asked
    notification_preference_set(user=user, email=True)
    assert notification_email_send(notification_id=notification.pk) is True
    assert mailoutbox[0].to == ["alice@example.com"]
    assert mailoutbox[0].subject == "chatsite：失败"


# --------------------------------------------------------------------------------------
# Driven in this process as a worker would (run_execute), against the scripted model
# --------------------------------------------------------------------------------------

CALCULATE = "Thought: I will add them.\nAction: calculator_{}\nAction Input: 40+2"
ANSWER = "Thought: Done.\nFinal Answer: It is 42."


def _scripted_profile(scripted_model, *replies, guarded: bool = False) -> AgentProfile:
    import uuid

    from agents.models import ModelConfig, ToolConfig

    name = f"sched-{uuid.uuid4().hex[:8]}"
    scripted_model.script(name, list(replies))
    config = ModelConfig.objects.create(
        name=name, base_url=scripted_model.base_url, model=name, max_retries=0
    )
    profile = AgentProfile.objects.create(name=name, slug=name, model_config=config)
    tool = ToolConfig.objects.create(
        name="calculator_guarded" if guarded else "calculator_plain",
        kind="calculator",
        description="Adds numbers.",
        needs_approval=guarded,
    )
    profile.tools.set([tool])
    return profile


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("budget", "guarded", "status", "kind"),
    [
        (None, False, AgentRun.Status.SUCCEEDED, Notification.Kind.FINISHED),
        (1, False, AgentRun.Status.OUT_OF_BUDGET, Notification.Kind.BUDGET_REACHED),
        (None, True, AgentRun.Status.AWAITING_APPROVAL, Notification.Kind.AWAITING_APPROVAL),
    ],
)
def test_a_scheduled_run_has_the_schedules_step_budget_and_its_end_is_notified(
    user, scripted_model, budget, guarded, status, kind
):
    from tests.driving import run_execute

    calculate = CALCULATE.format("guarded" if guarded else "plain")
    profile = _scripted_profile(scripted_model, Reply(calculate), Reply(ANSWER), guarded=guarded)
    schedule = schedule_create(owner=user, fields=_fields(profile, budget_steps=budget))
    run = schedule_run_now(schedule=schedule, user=user).run
    assert run is not None

    run_execute(run.pk)

    run.refresh_from_db()
    assert run.status == status
    notification = Notification.objects.get(run=run)
    assert (notification.kind, notification.schedule) == (kind, schedule)


def test_staff_schedule_for_a_user_only_with_the_permission(make_user, user, default_profile):
    staff = make_user("scheduler", is_staff=True)

    with pytest.raises(PermissionDenied):
        schedule_create(owner=user, fields=_fields(default_profile), created_by=staff)
    assert not Schedule.objects.exists()

    staff.user_permissions.add(Permission.objects.get(codename="add_schedule"))
    staff = type(staff).objects.get(pk=staff.pk)  # permissions are cached per instance
    schedule = schedule_create(owner=user, fields=_fields(default_profile), created_by=staff)
    assert (schedule.owner, schedule.created_by) == (user, staff)

    # Editing another user's schedule is the change permission's, which staff lacks here.
    with pytest.raises(RequestRefused) as refused:
        schedule_update(schedule=schedule, user=staff, fields=_fields(default_profile))
    assert refused.value.code == RefusalCode.NOT_FOUND


def test_a_refusal_names_its_field(user, default_profile):
    with pytest.raises(RequestRefused) as refused:
        schedule_create(owner=user, fields=_fields(default_profile, rule="FREQ=SOMETIMES"))
    assert refused.value.field == "rrule"
    with pytest.raises(RequestRefused) as refused:
        schedule_create(owner=user, fields=_fields(default_profile, rule="FREQ=DAILY;" * 60))
    assert (refused.value.field, refused.value.message) == (
        "rrule",
        "The recurrence rule is too long.",
    )


def test_a_scheduled_runs_end_counts_on_its_schedule(user, default_profile):
    """What a worker does once a fired run's drive ended: a failure adds one to the
    schedule's failures in a row, a success clears them."""
    from agents.services.execution import _run_ended

    schedule = schedule_create(owner=user, fields=_fields(default_profile))

    def failures_after_a_run_that(ended_as: str) -> int:
        run = schedule_run_now(schedule=schedule, user=user).run
        assert run is not None
        AgentRun.objects.filter(pk=run.pk).update(status=ended_as)
        _run_ended(run.pk)
        schedule.refresh_from_db()
        return schedule.failures_in_a_row

    assert failures_after_a_run_that(AgentRun.Status.FAILED) == 1
    assert failures_after_a_run_that(AgentRun.Status.SUCCEEDED) == 0
