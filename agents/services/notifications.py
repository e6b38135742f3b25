"""Notifications: a run finished, failed, or waits for its owner; a schedule paused itself.

Written when a worker's drive of a run ends (``notification_for_run``, called by
agents/services/execution.py), for every run, watched or not: whether anyone watches cannot
be known from the worker (the sockets are in daphne processes, and an open tab is not a
person looking at it), and one row per ending is cheap. The page marks read, as it arrives,
a notification about the conversation it has open, so a watched run does not light the bell.

Each row is idempotent by its ``key`` (run, kind, attempt), published after commit to the
owner's notifications socket, e-mailed if the owner asked, and delivered to the owner's
webhooks (agents/services/webhooks.py), each delivery a Celery task queued after commit.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from agents import events
from agents.db import rows, statements
from agents.models import (
    AgentRun,
    Notification,
    NotificationPreference,
    Schedule,
    Webhook,
    WebhookDelivery,
)
from agents.protocol import notification_frame, notifications_unread_frame
from agents.selectors import EndedRun, NotificationReach, notification_reach_get
from chatsite.server.db.prepared import prepared_cursor

logger = logging.getLogger(__name__)

WEBHOOK_TASK = "agents.webhook_deliver"
EMAIL_TASK = "agents.notification_email_send"

_KIND_OF_STATUS = {
    AgentRun.Status.SUCCEEDED: Notification.Kind.FINISHED,
    AgentRun.Status.FAILED: Notification.Kind.FAILED,
    AgentRun.Status.AWAITING_APPROVAL: Notification.Kind.AWAITING_APPROVAL,
    AgentRun.Status.OUT_OF_BUDGET: Notification.Kind.BUDGET_REACHED,
}


def notification_for_run(*, ended: EndedRun) -> Notification | None:
    """The notification for where the run stands as its drive ended (finished, failed,
    waiting for approval, stopped at a budget); None for a run still going, a cancelled one
    (its owner stopped it), or one already notified of this ending."""
    run = ended.run
    if run.status not in _KIND_OF_STATUS:
        return None
    kind = _KIND_OF_STATUS[AgentRun.Status(run.status)]
    return _notify(
        user_id=run.conversation.owner_id,
        kind=kind,
        key=f"run:{run.pk}:{kind}:{run.attempts}",
        run=run,
        schedule_id=ended.schedule_id,
        detail=run.error_message if kind == Notification.Kind.FAILED else "",
        reach=ended.owner_reach,
    )


def notification_schedule_paused(*, schedule: Schedule) -> Notification | None:
    """Tell the owner a schedule paused itself, and why (in the caller's transaction)."""
    assert schedule.paused_at is not None
    return _notify(
        user_id=schedule.owner_id,
        kind=Notification.Kind.SCHEDULE_PAUSED,
        key=f"schedule:{schedule.pk}:paused:{schedule.paused_at.timestamp():.6f}",
        run=None,
        schedule_id=schedule.pk,
        detail=schedule.paused_reason,
        reach=notification_reach_get(user_id=schedule.owner_id),
    )


def _notify(
    *,
    user_id: int,
    kind: str,
    key: str,
    run: AgentRun | None,
    schedule_id: int | None,
    detail: str,
    reach: NotificationReach,
) -> Notification | None:
    notification = Notification(
        user_id=user_id,
        kind=kind,
        key=key,
        run=run,
        conversation_id=run.conversation_id if run else None,
        schedule_id=schedule_id,
        detail=detail[:500],
    )
    # Most owners have neither a webhook nor e-mail, and then the row is all there is to
    # write, a statement of its own. Otherwise it commits with its deliveries.
    delivered = reach.any_webhook or reach.wants_email
    try:
        with transaction.atomic() if delivered else contextlib.nullcontext():
            if not _inserted(notification):
                return None  # notified already (its key)
            # The count was read before this row existed.
            events.publish_notification_on_commit(
                user_id, notification_frame(notification, unread=reach.unread + 1)
            )
            if reach.any_webhook:
                webhooks = _webhooks(user_id=user_id, schedule_id=schedule_id)
                for webhook_id in webhooks.values_list("pk", flat=True):
                    delivery = WebhookDelivery.objects.create(
                        webhook_id=webhook_id, notification=notification
                    )
                    task_enqueue_on_commit(WEBHOOK_TASK, delivery.pk)
            if reach.wants_email:
                task_enqueue_on_commit(EMAIL_TASK, notification.pk)
    except IntegrityError:
        # Its conversation (with the run) was deleted as the run ended: the foreign keys are
        # checked as the row commits, and nobody is left to tell.
        return None
    return notification


def _inserted(notification: Notification) -> bool:
    """Write the new ``notification`` (its id set) unless its key is taken; whether it was.
    A plain statement: every run's end writes one (docs/performance.md#after-run), and a
    taken key is no error that would end a caller's transaction."""
    insert, params = rows.insert(notification)  # sets created_at, as save() would
    with prepared_cursor() as cursor:
        cursor.execute(statements.notification_insert(insert), params)
        returned = cursor.fetchone()
    if returned is None:
        return False
    rows.mark_saved(notification, returned[0])
    return True


def _webhooks(*, user_id: int, schedule_id: int | None) -> QuerySet[Webhook]:
    """The user's webhooks for everything, and the schedule's own."""
    webhooks = Webhook.objects.filter(owner_id=user_id, schedule__isnull=True)
    if schedule_id is not None:
        webhooks = webhooks | Webhook.objects.filter(owner_id=user_id, schedule_id=schedule_id)
    return webhooks


def task_enqueue_on_commit(name: str, *args: int) -> None:
    """Queue a task by name once the transaction commits (services never import tasks)."""
    transaction.on_commit(lambda: _enqueue(name, *args))


def _enqueue(name: str, *args: int) -> None:
    if current_app.conf.task_always_eager:
        current_app.loader.import_default_modules()
        current_app.tasks[name].apply(args=list(args))
        return
    current_app.send_task(name, args=list(args))


def _unread(*, user_id: int) -> QuerySet[Notification]:
    return Notification.objects.filter(user_id=user_id, read_at__isnull=True)


def notifications_unread_count(*, user_id: int) -> int:
    return _unread(user_id=user_id).count()


def notifications_mark_read(*, user: User, ids: Sequence[int] | None = None) -> int:
    """Mark the user's notifications read (``ids``: only those; None: all). Returns how
    many changed; the user's open pages get the new unread count."""
    unread = Notification.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        unread = unread.filter(pk__in=list(ids))
    with transaction.atomic():
        changed = unread.update(read_at=timezone.now())
        if changed:
            count = notifications_unread_count(user_id=user.pk)
            events.publish_notification_on_commit(user.pk, notifications_unread_frame(count))
    return changed


def notification_preference_set(*, user: User, email: bool) -> NotificationPreference:
    preference, _created = NotificationPreference.objects.update_or_create(
        user=user, defaults={"email": email}
    )
    return preference


def notification_email_send(*, notification_id: int) -> bool:
    """E-mail one notification to its user, in their language, if they still want it and
    the site can send mail. True if it was sent."""
    notification = (
        Notification.objects.select_related("user", "user__preference", "schedule")
        .filter(pk=notification_id)
        .first()
    )
    if notification is None or not settings.EMAIL_BACKEND or not notification.user.email:
        return False
    if not NotificationPreference.objects.filter(user=notification.user, email=True).exists():
        return False
    preference = getattr(notification.user, "preference", None)
    language = (preference.language if preference else "") or settings.LANGUAGE_CODE
    with translation.override(language):
        subject = _("chatsite: %(what)s") % {"what": notification.get_kind_display()}
        lines = [str(notification.get_kind_display())]
        if notification.schedule is not None:
            lines.append(_("Schedule: %(title)s") % {"title": notification.schedule.title})
        if notification.detail:
            lines.append(notification.detail)
        if notification.conversation_id:
            lines.append(_("Conversation %(id)s") % {"id": notification.conversation_id})
    send_mail(subject, "\n\n".join(lines), None, [notification.user.email])
    return True
