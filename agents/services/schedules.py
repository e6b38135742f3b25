"""Schedules: a prompt an agent answers at set times, each firing a run through the chat's send.

celery beat (django-celery-beat's DatabaseScheduler) has ONE entry for all schedules,
``agents.schedules_fire_due``, every ``SCHEDULE_TICK_SECONDS``: it fires each active schedule
whose ``next_fire_at`` has come. A firing is a ``ScheduleFiring`` row, unique per (schedule,
occurrence), written in the transaction that sends the prompt: two ticks, two beats or a
redelivered task that reach the same occurrence write it once, and the loser writes nothing.
A beat that was down finds the missed occurrences due when it is back and fires the latest
of them, once, then moves ``next_fire_at`` past now.

The run starts through ``message_send``, the web chat's own send: the profile's permission,
the rate limit, the daily quota, the run-in-progress check and approval apply unchanged.

Staff allowed to in the admin make and edit a schedule for another user
(``agents.permissions.can_schedule_for``): every rule checked here is then the owner's (the
agents they may use, their number of schedules), the firings' runs are the owner's, and
``created_by`` keeps who made it. The schedules page, the admin and the API all check
through ``schedule_check``; a refusal names the field it is about (``RequestRefused.field``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from agents import selectors
from agents.models import AgentProfile, AgentRun, Conversation, Schedule, ScheduleFiring
from agents.permissions import can_change_schedule, can_schedule_for
from agents.protocol import RefusalCode, RequestRefused, max_message_chars
from agents.recurrence import RecurrenceError, check_rule, known_zone, next_occurrence
from agents.services.conversations import conversation_create, message_send
from agents.services.notifications import notification_schedule_paused

logger = logging.getLogger(__name__)

# The most a schedule may set for its runs (the page's form offers the same range).
MAX_BUDGET_STEPS = 1000
MAX_APPROVAL_EXPIRES_AFTER = 60 * 60 * 24 * 30


@dataclass(frozen=True)
class ScheduleFields:
    """What the owner sets; ``starts_at`` is aware (the first occurrence, DTSTART)."""

    profile: AgentProfile
    title: str
    prompt: str
    rule: str
    starts_at: datetime
    time_zone: str
    conversation_mode: str = Schedule.ConversationMode.NEW
    budget_steps: int | None = None
    approval_expires_after: int | None = None


def _invalid(message: str, field: str | None = None) -> RequestRefused:
    return RequestRefused(RefusalCode.INVALID_SCHEDULE, message, field=field)


def schedule_check(
    *, owner: User, user: User, fields: ScheduleFields, schedule: Schedule | None = None
) -> datetime | None:
    """Refuse what cannot make (or, given ``schedule``, change) ``owner``'s schedule when
    ``user`` asks; returns its first occurrence still to come. Writes nothing: forms call it
    to show a refusal beside its field, and the writes below call it again."""
    if schedule is None and not can_schedule_for(user, owner):
        raise PermissionDenied(_("You may not schedule for another user."))
    if schedule is not None:
        _check_may_change(schedule, user)
    upcoming = _checked(fields, owner=owner, for_another=user.pk != owner.pk, now=timezone.now())
    if schedule is None and Schedule.objects.filter(owner=owner).count() >= (
        settings.SCHEDULES_PER_USER
    ):
        if user.pk != owner.pk:
            raise _invalid(
                _("%(user)s has as many schedules as they may; they must delete one first.")
                % {"user": owner.get_username()}
            )
        raise _invalid(_("You have as many schedules as you may; delete one first."))
    return upcoming


def _checked(
    fields: ScheduleFields, *, owner: User, for_another: bool, now: datetime
) -> datetime | None:
    if not fields.prompt.strip():
        raise _invalid(_("The prompt is empty."), "prompt")
    if len(fields.prompt) > max_message_chars():
        raise _invalid(_("The prompt is too long."), "prompt")
    if not fields.title.strip():
        raise _invalid(_("Give the schedule a title."), "title")
    if not selectors.profiles_for_user(user=owner).filter(pk=fields.profile.pk).exists():
        # The owner's access, whoever schedules: a firing runs as the owner.
        message = (
            _("%(user)s may not use that agent.") % {"user": owner.get_username()}
            if for_another
            else _("That agent is not available to you.")
        )
        raise RequestRefused(RefusalCode.PROFILE_NOT_ALLOWED, message, field="profile")
    if not known_zone(fields.time_zone):
        raise _invalid(_("Unknown time zone: %(zone)s.") % {"zone": fields.time_zone}, "time_zone")
    if fields.conversation_mode not in Schedule.ConversationMode.values:
        raise _invalid(_("Choose where the answers go."), "conversation_mode")
    if fields.budget_steps is not None and fields.budget_steps < 1:
        raise _invalid(_("The step budget must be at least 1."), "budget_steps")
    if fields.budget_steps is not None and fields.budget_steps > MAX_BUDGET_STEPS:
        raise _invalid(
            _("The step budget can be %(most)s at most.") % {"most": MAX_BUDGET_STEPS},
            "budget_steps",
        )
    expires = fields.approval_expires_after
    if expires is not None and expires < 60:
        raise _invalid(
            _("An approval can expire after a minute at the soonest."), "approval_expires_after"
        )
    if expires is not None and expires > MAX_APPROVAL_EXPIRES_AFTER:
        raise _invalid(_("An approval can wait thirty days at the most."), "approval_expires_after")
    if len(fields.rule) > (Schedule._meta.get_field("rrule").max_length or 0):
        raise _invalid(_("The recurrence rule is too long."), "rrule")
    try:
        check_rule(fields.rule)
    except RecurrenceError as error:
        raise _invalid(str(error), "rrule") from None
    try:
        upcoming = next_occurrence(
            rule=fields.rule,
            starts_at=fields.starts_at,
            time_zone=fields.time_zone,
            after=now,
            inclusive=True,
        )
    except RecurrenceError as error:
        raise _invalid(str(error), "rrule") from None
    except OverflowError:
        # A start at the very edge of the calendar cannot be moved to the time zone.
        raise _invalid(_("That time is out of range."), "starts_at") from None
    if upcoming is None:
        raise _invalid(_("That time has passed: choose one still to come."), "starts_at")
    return upcoming


def schedule_create(
    *, owner: User, fields: ScheduleFields, created_by: User | None = None
) -> Schedule:
    """A new schedule of ``owner``'s; ``created_by`` (staff in the admin) if not the owner."""
    maker = created_by or owner
    upcoming = schedule_check(owner=owner, user=maker, fields=fields)
    schedule = Schedule(owner=owner, created_by=maker, next_fire_at=upcoming)
    _apply(schedule, fields)
    schedule.save()
    return schedule


def schedule_update(*, schedule: Schedule, user: User, fields: ScheduleFields) -> Schedule:
    upcoming = schedule_check(owner=schedule.owner, user=user, fields=fields, schedule=schedule)
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
        if fields.conversation_mode != locked.conversation_mode:
            locked.conversation = None
        _apply(locked, fields)
        locked.next_fire_at = upcoming
        locked.save()
    return locked


def schedule_fields_of(schedule: Schedule) -> ScheduleFields:
    """What ``schedule`` has now, as the fields an update starts from."""
    return ScheduleFields(
        profile=schedule.profile,
        title=schedule.title,
        prompt=schedule.prompt,
        rule=schedule.rrule,
        starts_at=schedule.starts_at,
        time_zone=schedule.time_zone,
        conversation_mode=schedule.conversation_mode,
        budget_steps=schedule.budget_steps,
        approval_expires_after=schedule.approval_expires_after,
    )


def schedule_pause(*, schedule: Schedule, user: User) -> Schedule:
    _check_may_change(schedule, user)
    Schedule.objects.filter(pk=schedule.pk, paused_at__isnull=True).update(
        paused_at=timezone.now(), paused_reason="", updated_at=timezone.now()
    )
    schedule.refresh_from_db()
    return schedule


def schedule_resume(*, schedule: Schedule, user: User) -> Schedule:
    """Resume a paused schedule from now on: what it would have fired while paused is not
    fired late."""
    _check_may_change(schedule, user)
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
        locked.paused_at = None
        locked.paused_reason = ""
        locked.failures_in_a_row = 0
        locked.next_fire_at = next_occurrence(
            rule=locked.rrule,
            starts_at=locked.starts_at,
            time_zone=locked.time_zone,
            after=timezone.now(),
            inclusive=True,
        )
        locked.save()
    return locked


def schedule_delete(*, schedule: Schedule, user: User) -> None:
    """Delete the schedule; its conversations and their runs stay, as the chat's do."""
    _check_may_change(schedule, user)
    schedule.delete()


def schedule_run_now(*, schedule: Schedule, user: User) -> ScheduleFiring:
    """Fire the schedule once now, whatever its timing (paused too); its next occurrence
    stays as it was."""
    _check_may_change(schedule, user)
    firing = _fire(schedule_id=schedule.pk, occurrence=timezone.now(), advance=False)
    assert firing is not None  # a new occurrence, so never a duplicate
    return firing


def schedules_fire_due(*, now: datetime | None = None) -> list[int]:
    """Fire every active schedule whose next occurrence has come (beat's one entry); returns
    the ids of the firings written."""
    now = now or timezone.now()
    due = Schedule.objects.filter(paused_at__isnull=True, next_fire_at__lte=now).values_list(
        "pk", "next_fire_at"
    )
    fired = []
    for schedule_id, occurrence in due:
        assert occurrence is not None  # next_fire_at <= now
        firing = _fire(schedule_id=schedule_id, occurrence=occurrence, advance=True, now=now)
        if firing is not None:
            fired.append(firing.pk)
    return fired


def _fire(
    *, schedule_id: int, occurrence: datetime, advance: bool, now: datetime | None = None
) -> ScheduleFiring | None:
    """Write the firing of ``occurrence`` and send the prompt, in one transaction; None if
    the occurrence was fired already (or the schedule moved on meanwhile).

    A send the chat refuses (the quota, a run in progress, a profile no longer allowed) is
    stored on the firing as its error and counts as a failure; the occurrence is fired all
    the same, so it is not tried again at every tick.
    """
    now = now or timezone.now()
    try:
        with transaction.atomic():
            schedule = (
                Schedule.objects.select_for_update(of=("self",))
                .select_related("owner", "profile")
                .filter(pk=schedule_id)
                .first()
            )
            if schedule is None:
                return None
            if advance:
                # Another tick got here first: it moved next_fire_at on.
                if schedule.paused_at is not None or schedule.next_fire_at != occurrence:
                    return None
                occurrence = _latest_due(schedule, now)
                schedule.next_fire_at = next_occurrence(
                    rule=schedule.rrule,
                    starts_at=schedule.starts_at,
                    time_zone=schedule.time_zone,
                    after=max(occurrence, now),
                )
            firing = ScheduleFiring.objects.create(
                schedule=schedule, occurrence=occurrence, budget_steps=schedule.budget_steps
            )
            try:
                with transaction.atomic():
                    firing.run = _send(schedule)
                firing.save(update_fields=["run"])
            except RequestRefused as refusal:
                firing.error = refusal.message
                firing.save(update_fields=["error"])
                if _count_failure(schedule, reason=refusal.message):
                    notification_schedule_paused(schedule=schedule)
            schedule.save(
                update_fields=[
                    "next_fire_at",
                    "conversation",
                    "failures_in_a_row",
                    "paused_at",
                    "paused_reason",
                    "updated_at",
                ]
            )
    except IntegrityError:
        logger.info("schedule %s: occurrence %s was fired already", schedule_id, occurrence)
        return None
    logger.info("schedule %s fired for %s (firing %s)", schedule_id, occurrence, firing.pk)
    return firing


def _latest_due(schedule: Schedule, now: datetime) -> datetime:
    """The latest occurrence from ``next_fire_at`` up to now: the one a beat that was down
    fires for all it missed."""
    assert schedule.next_fire_at is not None
    latest = schedule.next_fire_at
    while True:
        following = next_occurrence(
            rule=schedule.rrule,
            starts_at=schedule.starts_at,
            time_zone=schedule.time_zone,
            after=latest,
        )
        if following is None or following > now:
            return latest
        latest = following


def _send(schedule: Schedule) -> AgentRun:
    """The firing's run, started as the owner's own send would start it (in the caller's
    savepoint: a refused send leaves no new conversation behind)."""
    appending = schedule.conversation_mode == Schedule.ConversationMode.APPEND
    conversation: Conversation | None = schedule.conversation if appending else None
    if conversation is None:
        conversation = conversation_create(
            owner=schedule.owner, title=schedule.title, profile=schedule.profile
        )
    result = message_send(
        conversation=conversation,
        user=schedule.owner,
        content=schedule.prompt,
        profile=schedule.profile,
    )
    if appending:
        schedule.conversation = conversation
    return result.run


def _count_failure(schedule: Schedule, *, reason: str) -> bool:
    """One more failure in a row; pause the schedule at the limit. True if it paused."""
    schedule.failures_in_a_row += 1
    if schedule.is_paused or schedule.failures_in_a_row < settings.SCHEDULE_MAX_FAILURES_IN_A_ROW:
        return False
    schedule.paused_at = timezone.now()
    schedule.paused_reason = (
        _("Paused after %(count)s failures in a row. The last: %(reason)s")
        % {"count": schedule.failures_in_a_row, "reason": reason}
    )[:500]
    return True


def schedule_run_ended(*, run: AgentRun, schedule_id: int) -> Schedule | None:
    """Count the run a firing of schedule ``schedule_id`` started, once it ended: a success
    clears the failures in a row, a failure adds one and may pause the schedule. Returns the
    schedule if this paused it."""
    if run.status not in (AgentRun.Status.SUCCEEDED, AgentRun.Status.FAILED):
        return None
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().filter(pk=schedule_id).first()
        if schedule is None:
            return None
        if run.status == AgentRun.Status.SUCCEEDED:
            if schedule.failures_in_a_row:
                schedule.failures_in_a_row = 0
                schedule.save(update_fields=["failures_in_a_row"])
            return None
        was_paused = schedule.is_paused
        paused = _count_failure(schedule, reason=run.error_message or _("The run failed."))
        schedule.save(update_fields=["failures_in_a_row", "paused_at", "paused_reason"])
        if paused and not was_paused:
            notification_schedule_paused(schedule=schedule)
            return schedule
        return None


def _apply(schedule: Schedule, fields: ScheduleFields) -> None:
    schedule.profile = fields.profile
    schedule.title = fields.title.strip()[:200]
    schedule.prompt = fields.prompt
    schedule.rrule = fields.rule
    schedule.starts_at = fields.starts_at
    schedule.time_zone = fields.time_zone
    schedule.conversation_mode = fields.conversation_mode
    schedule.budget_steps = fields.budget_steps
    schedule.approval_expires_after = fields.approval_expires_after


def _check_may_change(schedule: Schedule, user: User) -> None:
    if not can_change_schedule(user, schedule):
        raise RequestRefused(RefusalCode.NOT_FOUND, _("No such schedule."))
