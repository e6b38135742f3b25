"""The schedules page (from the user menu): schedules, the notification preference, webhooks
and their delivery log; and the notifications page the bell links to.

Plain forms that post and redirect, so every action works without script. Writes go through
agents/services/schedules.py, notifications.py and webhooks.py; a refusal is shown on the
form it came from, with what was typed kept.
"""

from __future__ import annotations

from datetime import time
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from agents import selectors
from agents.models import AgentProfile, Notification, Schedule
from agents.permissions import signed_in_user
from agents.protocol import RequestRefused
from agents.recurrence import RecurrenceError, Shape, describe, first_local, rule_of, zone
from agents.services import notifications as notification_services
from agents.services import schedules as schedule_services
from agents.services import webhooks as webhook_services

FREQUENCY_CHOICES = [
    ("once", gettext_lazy("Once")),
    ("daily", gettext_lazy("Every day")),
    ("weekdays", gettext_lazy("Every weekday (Monday to Friday)")),
    ("weekly", gettext_lazy("Every week, on a day")),
    ("monthly", gettext_lazy("Every month, on the nth weekday")),
]
WEEKDAY_CHOICES = [
    (0, gettext_lazy("Monday")),
    (1, gettext_lazy("Tuesday")),
    (2, gettext_lazy("Wednesday")),
    (3, gettext_lazy("Thursday")),
    (4, gettext_lazy("Friday")),
    (5, gettext_lazy("Saturday")),
    (6, gettext_lazy("Sunday")),
]
NTH_CHOICES = [
    (1, gettext_lazy("First")),
    (2, gettext_lazy("Second")),
    (3, gettext_lazy("Third")),
    (4, gettext_lazy("Fourth")),
    (-1, gettext_lazy("Last")),
]


class ScheduleForm(forms.Form):
    title = forms.CharField(label=gettext_lazy("Title"), max_length=200)
    profile = forms.ModelChoiceField(
        label=gettext_lazy("Agent"), queryset=AgentProfile.objects.none(), empty_label=None
    )
    prompt = forms.CharField(label=gettext_lazy("Prompt"), widget=forms.Textarea(attrs={"rows": 4}))
    frequency = forms.ChoiceField(label=gettext_lazy("Repeats"), choices=FREQUENCY_CHOICES)
    day = forms.DateField(
        label=gettext_lazy("Date (the first time)"),
        # ISO forms: what <input type="date"> and "time" read, whatever the page's language.
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
    )
    at = forms.TimeField(
        label=gettext_lazy("Time"), widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M")
    )
    weekday = forms.TypedChoiceField(
        label=gettext_lazy("Day of the week"), choices=WEEKDAY_CHOICES, coerce=int, initial=0
    )
    nth = forms.TypedChoiceField(
        label=gettext_lazy("Week of the month"), choices=NTH_CHOICES, coerce=int, initial=1
    )
    time_zone = forms.CharField(label=gettext_lazy("Time zone"), max_length=64)
    conversation_mode = forms.ChoiceField(
        label=gettext_lazy("Answers go to"), choices=Schedule.ConversationMode.choices
    )
    budget_steps = forms.IntegerField(
        label=gettext_lazy("Step budget"),
        required=False,
        min_value=1,
        max_value=1000,
        help_text=gettext_lazy("Empty: the agent's own."),
    )
    approval_expires_minutes = forms.IntegerField(
        label=gettext_lazy("Decline a call waiting for approval after (minutes)"),
        required=False,
        min_value=1,
        max_value=60 * 24 * 30,
        help_text=gettext_lazy("Empty: the site's own expiry."),
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Every profile is listed: one the user may not use is refused by the service, with
        # the same words as the chat's, rather than vanishing from a stale page.
        field = self.fields["profile"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = selectors.profiles_for_user(user=user)

    def clean_time_zone(self) -> str:
        name = self.cleaned_data["time_zone"].strip()
        try:
            zone(name)
        except RecurrenceError as error:
            raise forms.ValidationError(str(error)) from None
        return name

    def schedule_fields(self) -> schedule_services.ScheduleFields:
        data = self.cleaned_data
        shape = Shape(
            frequency=data["frequency"],
            day=data["day"],
            at=data["at"],
            weekday=data["weekday"],
            nth=data["nth"],
        )
        local = zone(data["time_zone"])
        starts_at = first_local(shape).replace(tzinfo=local)
        expires = data.get("approval_expires_minutes")
        return schedule_services.ScheduleFields(
            profile=data["profile"],
            title=data["title"],
            prompt=data["prompt"],
            rule=rule_of(shape),
            starts_at=starts_at,
            time_zone=data["time_zone"],
            conversation_mode=data["conversation_mode"],
            budget_steps=data.get("budget_steps"),
            approval_expires_after=expires * 60 if expires else None,
        )


def _initial_of(schedule: Schedule) -> dict[str, Any]:
    local = schedule.starts_at.astimezone(zone(schedule.time_zone))
    parts = dict(part.split("=", 1) for part in schedule.rrule.split(";") if "=" in part)
    days = parts.get("BYDAY", "")
    frequency = {
        "": "once",
        "FREQ=DAILY": "daily",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR": "weekdays",
    }.get(schedule.rrule, "weekly" if parts.get("FREQ") == "WEEKLY" else "monthly")
    codes = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
    weekday = codes.index(days[-2:]) if days[-2:] in codes else 0
    nth = int(days[:-2]) if frequency == "monthly" and days[:-2].lstrip("-").isdigit() else 1
    return {
        "title": schedule.title,
        "profile": schedule.profile_id,
        "prompt": schedule.prompt,
        "frequency": frequency,
        "day": local.date(),
        "at": local.time().replace(second=0, microsecond=0),
        "weekday": weekday,
        "nth": nth,
        "time_zone": schedule.time_zone,
        "conversation_mode": schedule.conversation_mode,
        "budget_steps": schedule.budget_steps,
        "approval_expires_minutes": (schedule.approval_expires_after or 0) // 60 or None,
    }


def schedule_description(schedule: Schedule) -> str:
    return describe(rule=schedule.rrule, starts_at=schedule.starts_at, time_zone=schedule.time_zone)


def _page(request: HttpRequest, form: ScheduleForm, *, status: int = 200) -> HttpResponse:
    user = request.user
    schedules = list(selectors.schedules_for_user(user=user))
    for schedule in schedules:
        schedule.description = schedule_description(schedule)  # type: ignore[attr-defined]
    context = {
        "form": form,
        "schedules": schedules,
        "email_wanted": selectors.notification_email_wanted(user=user),
        "webhooks": selectors.webhooks_for_user(user=user),
        "deliveries": selectors.webhook_deliveries_for_user(user=user),
        "new_webhook_secret": request.session.pop("new_webhook_secret", None),
    }
    return render(request, "agents/schedules.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def schedules(request: HttpRequest) -> HttpResponse:
    """The list, and the form that adds one."""
    user = signed_in_user(request.user)
    if request.method == "POST":
        form = ScheduleForm(request.POST, user=user)
        if form.is_valid():
            try:
                schedule = schedule_services.schedule_create(
                    owner=user, fields=form.schedule_fields()
                )
            except (RequestRefused, RecurrenceError) as refusal:
                _show_refusal(form, refusal)
            else:
                messages.success(
                    request,
                    _("Scheduled: %(when)s.") % {"when": schedule_description(schedule)},
                )
                return redirect("schedules")
        return _page(request, form, status=400)
    now = timezone.localtime()
    form = ScheduleForm(
        user=user,
        initial={
            "frequency": "daily",
            "day": now.date(),
            "at": time(8, 0),
            "time_zone": timezone.get_current_timezone_name(),
            "conversation_mode": Schedule.ConversationMode.NEW,
        },
    )
    return _page(request, form)


@login_required
@require_http_methods(["GET", "POST"])
def schedule_edit(request: HttpRequest, schedule_id: int) -> HttpResponse:
    user = signed_in_user(request.user)
    schedule = _schedule_or_404(request, schedule_id)
    if request.method == "POST":
        form = ScheduleForm(request.POST, user=user)
        if form.is_valid():
            try:
                schedule_services.schedule_update(
                    schedule=schedule, user=user, fields=form.schedule_fields()
                )
            except (RequestRefused, RecurrenceError) as refusal:
                _show_refusal(form, refusal)
            else:
                messages.success(request, _("Saved."))
                return redirect("schedules")
        status = 400
    else:
        form = ScheduleForm(user=user, initial=_initial_of(schedule))
        status = 200
    context = {"form": form, "schedule": schedule}
    return render(request, "agents/schedule_edit.html", context, status=status)


@login_required
@require_POST
def schedule_action(request: HttpRequest, schedule_id: int, action: str) -> HttpResponse:
    user = signed_in_user(request.user)
    schedule = _schedule_or_404(request, schedule_id)
    if action == "pause":
        schedule_services.schedule_pause(schedule=schedule, user=user)
        messages.success(request, _("Paused: %(title)s.") % {"title": schedule.title})
    elif action == "resume":
        schedule_services.schedule_resume(schedule=schedule, user=user)
        messages.success(request, _("Resumed: %(title)s.") % {"title": schedule.title})
    elif action == "run":
        firing = schedule_services.schedule_run_now(schedule=schedule, user=user)
        if firing.error:
            messages.error(request, firing.error)
        else:
            # The page stays: the bell says when the run ends, as it would for a timed firing.
            messages.success(request, _("Started: %(title)s.") % {"title": schedule.title})
    elif action == "delete":
        schedule_services.schedule_delete(schedule=schedule, user=user)
        messages.success(request, _("Deleted: %(title)s.") % {"title": schedule.title})
    else:
        raise Http404
    return redirect("schedules")


@login_required
@require_POST
def notification_email(request: HttpRequest) -> HttpResponse:
    notification_services.notification_preference_set(
        user=signed_in_user(request.user), email=request.POST.get("email") == "1"
    )
    messages.success(request, _("Saved."))
    return redirect("schedules")


@login_required
@require_POST
def webhook_create(request: HttpRequest) -> HttpResponse:
    user = signed_in_user(request.user)
    schedule = None
    if schedule_id := request.POST.get("schedule"):
        schedule = selectors.schedule_get(
            user=user, schedule_id=int(schedule_id) if schedule_id.isdigit() else 0
        )
        if schedule is None:
            raise Http404
    try:
        created = webhook_services.webhook_create(
            owner=user, url=request.POST.get("url", ""), schedule=schedule
        )
    except RequestRefused as refusal:
        messages.error(request, refusal.message)
    else:
        # Shown once, on the page this redirects to.
        request.session["new_webhook_secret"] = created.secret
    return redirect("schedules")


@login_required
@require_POST
def webhook_delete(request: HttpRequest, webhook_id: int) -> HttpResponse:
    user = signed_in_user(request.user)
    webhook = selectors.webhook_get(user=user, webhook_id=webhook_id)
    if webhook is None:
        raise Http404
    webhook_services.webhook_delete(webhook=webhook, user=user)
    messages.success(request, _("Webhook deleted."))
    return redirect("schedules")


@login_required
@require_http_methods(["GET", "POST"])
def notifications(request: HttpRequest) -> HttpResponse:
    """Every recent notification, linking to its run; POST marks them all read."""
    user = signed_in_user(request.user)
    if request.method == "POST":
        # ``id`` (repeated): only those; none: all. The page marks read a notification
        # about the conversation it shows (static/js/notifications.js), asking for JSON.
        ids = [int(value) for value in request.POST.getlist("id") if value.isdigit()]
        changed = notification_services.notifications_mark_read(user=user, ids=ids or None)
        if "application/json" in request.headers.get("Accept", ""):
            return JsonResponse({"marked_read": changed})
        return redirect("notifications")
    listed: list[Notification] = selectors.notifications_for_user(user=user, limit=100)
    return render(request, "agents/notifications.html", {"notifications": listed})


@login_required
@require_POST
def notification_open(request: HttpRequest, notification_id: int) -> HttpResponse:
    """Mark one notification read and go to its run's conversation."""
    user = signed_in_user(request.user)
    notification = next(
        (
            n
            for n in selectors.notifications_for_user(user=user, limit=100)
            if n.pk == notification_id
        ),
        None,
    )
    if notification is None:
        raise Http404
    notification_services.notifications_mark_read(user=user, ids=[notification.pk])
    if notification.conversation_id is None:
        return redirect("schedules")
    return redirect("conversation", notification.conversation_id)


def _schedule_or_404(request: HttpRequest, schedule_id: int) -> Schedule:
    schedule = selectors.schedule_get(user=request.user, schedule_id=schedule_id)
    if schedule is None:
        raise Http404(_("No such schedule."))
    return schedule


# The form's field for the service's, where they differ (the form builds the rule and its
# start from a few choices).
FORM_FIELD_NAMES = {
    "rrule": "frequency",
    "starts_at": "day",
    "approval_expires_after": "approval_expires_minutes",
}


def _show_refusal(form: ScheduleForm, refusal: Exception) -> None:
    """The service's refusal beside the field it names, else above the form."""
    if not isinstance(refusal, RequestRefused):
        form.add_error(None, str(refusal))
        return
    field = FORM_FIELD_NAMES.get(refusal.field or "", refusal.field)
    form.add_error(field if field in form.fields else None, refusal.message)
