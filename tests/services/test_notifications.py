"""A run's notification reaches its owner alone: the unread count it carries, the webhooks
it queues and the e-mail it asks for are the owner's, whatever other users have.

The reach (read with the run's end, ``statements.ended_run``, or alone,
``notification_reach``) and the row (``notification_insert``) are plain statements; these
tests hold them to the ORM's rules they stand beside (the unread count of
``notifications_unread_count``, the webhooks of ``_webhooks``), and hold what the row's key
and the deliveries' transaction promise."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

from agents.models import (
    AgentRun,
    Conversation,
    Message,
    Notification,
    NotificationPreference,
    Schedule,
    ScheduleFiring,
    Webhook,
    WebhookDelivery,
)
from agents.selectors import ended_run_get, notification_reach_get
from agents.services import execution, notifications
from agents.services.notifications import (
    EMAIL_TASK,
    WEBHOOK_TASK,
    notifications_mark_read,
    notifications_unread_count,
)
from tests.driving import notified_at_its_end

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch) -> dict[str, list]:
    """What the notification publishes and queues, as it would after commit."""
    out: dict[str, list] = {"frames": [], "tasks": []}
    monkeypatch.setattr(
        notifications.events,
        "publish_notification_on_commit",
        lambda user_id, frame: out["frames"].append((user_id, frame)),
    )
    monkeypatch.setattr(
        notifications, "task_enqueue_on_commit", lambda name, *args: out["tasks"].append(name)
    )
    return out


def _failed_run(owner) -> AgentRun:
    conversation = Conversation.objects.create(owner=owner, title="t")
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    return AgentRun.objects.create(
        conversation=conversation, trigger_message=question, status=AgentRun.Status.FAILED
    )


def _unread(user, count: int, *, read: int = 0) -> None:
    for n in range(count + read):
        Notification.objects.create(
            user=user,
            kind=Notification.Kind.FINISHED,
            key=f"{user.pk}:{n}",
            read_at=timezone.now() if n < read else None,
        )


def test_the_unread_count_a_notification_carries_is_its_owners_own(user, other_user, sent):
    _unread(user, 2, read=3)
    _unread(other_user, 5)

    notification = notified_at_its_end(_failed_run(user))

    assert notification is not None
    [(user_id, frame)] = sent["frames"]
    assert user_id == user.pk
    assert frame["unread"] == notifications_unread_count(user_id=user.pk) == 3
    notifications_mark_read(user=user)
    assert notification_reach_get(user_id=user.pk).unread == 0
    assert notification_reach_get(user_id=other_user.pk).unread == 5


def test_another_users_webhooks_and_email_choice_never_reach_the_owner(
    user, other_user, sent, default_profile
):
    Webhook.objects.create(owner=other_user, url="http://127.0.0.1:9/theirs")
    NotificationPreference.objects.create(user=other_user, email=True)

    assert notified_at_its_end(_failed_run(user)) is not None

    assert sent["tasks"] == []
    assert not WebhookDelivery.objects.exists()
    reach = notification_reach_get(user_id=other_user.pk)
    assert (reach.any_webhook, reach.wants_email) == (True, True)


def test_the_owners_webhooks_apply_as_the_rule_says_and_email_when_asked(
    user, sent, default_profile
):
    def schedule(title: str) -> Schedule:
        return Schedule.objects.create(
            owner=user, profile=default_profile, title=title, prompt="p", starts_at=timezone.now()
        )

    # A webhook bound to another schedule is the owner's, but not for this run.
    Webhook.objects.create(owner=user, url="http://127.0.0.1:9/other", schedule=schedule("o"))
    NotificationPreference.objects.create(user=user, email=False)
    assert notified_at_its_end(_failed_run(user)) is not None
    assert sent["tasks"] == []

    everything = Webhook.objects.create(owner=user, url="http://127.0.0.1:9/all")
    NotificationPreference.objects.filter(user=user).update(email=True)
    assert notified_at_its_end(_failed_run(user)) is not None
    assert sorted(sent["tasks"]) == [EMAIL_TASK, WEBHOOK_TASK]
    assert WebhookDelivery.objects.get().webhook == everything


@pytest.mark.smoke  # run on SQLite too (make test-sqlite): the insert's ON CONFLICT
def test_an_ending_notified_twice_is_written_and_published_once(user, sent):
    run = _failed_run(user)

    first = notified_at_its_end(run)
    second = notified_at_its_end(run)

    assert first is not None
    assert first.pk is not None
    assert second is None
    assert list(Notification.objects.filter(run=run).values_list("pk", flat=True)) == [first.pk]
    [(_, frame)] = sent["frames"]
    assert frame["notification"]["id"] == first.pk
    assert frame["notification"]["created_at"] == first.created_at.isoformat()
    assert frame["unread"] == 1


@pytest.mark.smoke  # run on SQLite too (make test-sqlite): the insert's ON CONFLICT
def test_a_taken_key_leaves_the_callers_transaction_usable(user, default_profile, sent):
    schedule = Schedule.objects.create(
        owner=user, profile=default_profile, title="s", prompt="p", starts_at=timezone.now()
    )
    schedule.paused_at = timezone.now()
    schedule.paused_reason = "It failed three times."

    with transaction.atomic():
        assert notifications.notification_schedule_paused(schedule=schedule) is not None
        assert notifications.notification_schedule_paused(schedule=schedule) is None
        # A key taken is no database error: the transaction goes on and commits.
        schedule.save(update_fields=["paused_at", "paused_reason"])

    stored = Notification.objects.get(schedule=schedule)
    assert stored.kind == Notification.Kind.SCHEDULE_PAUSED
    assert stored.detail == "It failed three times."
    assert Schedule.objects.get(pk=schedule.pk).paused_reason == "It failed three times."


def test_a_notification_and_its_webhook_deliveries_are_written_together(
    user, monkeypatch, django_capture_on_commit_callbacks
):
    Webhook.objects.create(owner=user, url="http://127.0.0.1:9/all")

    def refused(**_: object) -> None:
        raise RuntimeError("the delivery could not be written")

    monkeypatch.setattr(WebhookDelivery.objects, "create", refused)
    run = _failed_run(user)
    with django_capture_on_commit_callbacks() as after_commit, pytest.raises(RuntimeError):
        notified_at_its_end(run)

    # Rolled back with its delivery: no row, and nothing left to publish or queue.
    assert not Notification.objects.filter(run=run).exists()
    assert after_commit == []


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_conversation_was_deleted_as_it_ended_is_not_notified(user, sent):
    run = _failed_run(user)
    ended = ended_run_get(run_id=run.pk)
    assert ended is not None
    Conversation.objects.filter(pk=run.conversation_id).delete()

    # The row's foreign keys fail as it commits: no notification, and no error.
    assert notifications.notification_for_run(ended=ended) is None
    assert not Notification.objects.exists()
    assert sent["frames"] == []


def test_a_failed_scheduled_run_that_pauses_its_schedule_counts_both_notifications(
    user, default_profile, sent, settings
):
    # The run's end reads the owner's unread count with the run; the schedule pausing
    # itself writes a notification after that read, so the run's own must count it too.
    settings.SCHEDULE_MAX_FAILURES_IN_A_ROW = 1
    _unread(user, 2)
    schedule = Schedule.objects.create(
        owner=user, profile=default_profile, title="s", prompt="p", starts_at=timezone.now()
    )
    run = _failed_run(user)
    ScheduleFiring.objects.create(schedule=schedule, occurrence=timezone.now(), run=run)

    execution._run_ended(run.pk)

    paused, failed = (frame for _, frame in sent["frames"])
    assert paused["notification"]["kind"] == Notification.Kind.SCHEDULE_PAUSED
    assert failed["notification"]["kind"] == Notification.Kind.FAILED
    assert (paused["unread"], failed["unread"]) == (3, 4)
    assert notifications_unread_count(user_id=user.pk) == 4


def test_a_run_that_ends_without_pausing_anything_counts_what_was_unread(
    user, default_profile, sent
):
    _unread(user, 2, read=1)
    schedule = Schedule.objects.create(
        owner=user, profile=default_profile, title="s", prompt="p", starts_at=timezone.now()
    )
    run = _failed_run(user)
    ScheduleFiring.objects.create(schedule=schedule, occurrence=timezone.now(), run=run)

    execution._run_ended(run.pk)

    [(_, failed)] = sent["frames"]
    assert failed["notification"]["kind"] == Notification.Kind.FAILED
    assert failed["unread"] == notifications_unread_count(user_id=user.pk) == 3
