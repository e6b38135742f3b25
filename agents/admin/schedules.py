"""Every user's schedules, their firings, notifications and webhook deliveries, for staff.

Staff pause and resume a schedule (as its owner would, through agents/services/schedules.py).
Staff with the ``agents.add_schedule`` permission schedule a prompt for a chosen user, and
with ``agents.change_schedule`` edit anyone's, through the same service: the form shows the
service's refusal beside its field, and what the schedule may do is its owner's (their
agents, their number of schedules), never the staff member's. A firing is never written
here, only by a beat tick or "Run now".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agents.admin.pages import ReadOnlyAdminMixin
from agents.models import Notification, Schedule, ScheduleFiring, WebhookDelivery
from agents.permissions import can_change_schedule, signed_in_user
from agents.protocol import RequestRefused
from agents.recurrence import RecurrenceError, describe, zone
from agents.services import schedules as schedule_services

# What staff set on a schedule (the owner only when adding one).
EDITABLE_FIELDS = [
    "profile",
    "title",
    "prompt",
    "rrule",
    "starts_at",
    "time_zone",
    "conversation_mode",
    "budget_steps",
    "approval_expires_after",
]
# Everything the change page shows.
SHOWN_FIELDS: list[str] = [
    "title",
    "owner",
    "profile",
    "prompt",
    "when",
    "rrule",
    "starts_at",
    "time_zone",
    "conversation_mode",
    "conversation",
    "budget_steps",
    "approval_expires_after",
    "next_fire_at",
    "paused_at",
    "paused_reason",
    "failures_in_a_row",
    "created_by",
    "created_at",
    "updated_at",
]


class ScheduleAdminForm(forms.ModelForm):
    """The schedule's fields, checked by ``schedule_check`` as the acting staff member for
    the owner; ``starts_at`` is read on the wall clock of the schedule's time zone."""

    acting: User  # set per request by ScheduleAdmin.get_form

    class Meta:
        model = Schedule
        fields = ["owner", *EDITABLE_FIELDS]
        help_texts = {
            "rrule": _("RFC 5545, e.g. FREQ=WEEKLY;BYDAY=MO. Empty: once, at the start."),
            "starts_at": _("The first time, on the clock of the time zone below."),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        instance = self.instance
        if instance.pk and "starts_at" in self.fields:
            # Shown as the owner set it, not in the staff member's time zone.
            local = instance.starts_at.astimezone(zone(instance.time_zone))
            self.initial["starts_at"] = local.replace(tzinfo=None)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors or "starts_at" not in data:
            return data
        time_zone = data.get("time_zone", "")
        try:
            local = zone(time_zone)
        except RecurrenceError as error:
            self.add_error("time_zone", str(error))
            return data
        data["starts_at"] = timezone.make_naive(data["starts_at"]).replace(tzinfo=local)
        editing = self.instance.pk is not None
        try:
            schedule_services.schedule_check(
                owner=self.instance.owner if editing else data["owner"],
                user=self.acting,
                fields=self.schedule_fields(),
                schedule=self.instance if editing else None,
            )
        except RequestRefused as refusal:
            field = refusal.field if refusal.field in self.fields else None
            self.add_error(field, refusal.message)
        except PermissionDenied as denied:
            self.add_error(None, str(denied))
        return data

    def schedule_fields(self) -> schedule_services.ScheduleFields:
        data = self.cleaned_data
        starts_at: datetime = data["starts_at"]
        return schedule_services.ScheduleFields(
            profile=data["profile"],
            title=data["title"],
            prompt=data["prompt"],
            rule=data["rrule"],
            starts_at=starts_at,
            time_zone=data["time_zone"],
            conversation_mode=data["conversation_mode"],
            budget_steps=data.get("budget_steps"),
            approval_expires_after=data.get("approval_expires_after"),
        )


class ScheduleFiringInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ScheduleFiring
    fields = ["occurrence", "run", "budget_steps", "error", "fired_at"]
    extra = 0
    max_num = 0
    ordering = ["-occurrence"]


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleAdminForm
    list_display = ["title", "owner", "profile", "when", "next_fire_at", "paused_at"]
    list_filter = [("profile", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["owner", "profile"]
    search_fields = ["title", "prompt", "owner__username"]
    inlines = [ScheduleFiringInline]
    actions = ["pause", "resume"]

    @admin.display(description=_("When"))
    def when(self, obj: Schedule) -> str:
        return describe(rule=obj.rrule, starts_at=obj.starts_at, time_zone=obj.time_zone)

    def get_fields(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        return ["owner", *EDITABLE_FIELDS] if obj is None else SHOWN_FIELDS

    def get_readonly_fields(self, request: HttpRequest, obj: Schedule | None = None) -> list[str]:
        if obj is None:
            return []
        if self.has_change_permission(request, obj):
            return [name for name in SHOWN_FIELDS if name not in EDITABLE_FIELDS]
        return SHOWN_FIELDS

    def get_form(
        self, request: HttpRequest, obj: Schedule | None = None, change: bool = False, **kwargs: Any
    ) -> type[ModelForm[Schedule]]:
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"acting": signed_in_user(request.user)})

    def get_inlines(self, request: HttpRequest, obj: Schedule | None) -> list[Any]:
        return [] if obj is None else list(self.inlines)

    def has_view_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        return bool(request.user.is_staff)

    def has_change_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        if obj is None:
            # The list's pause and resume actions, for any staff.
            return bool(request.user.is_staff)
        return can_change_schedule(signed_in_user(request.user), obj)

    def has_delete_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: Schedule, form: ModelForm[Schedule], change: bool
    ) -> None:
        assert isinstance(form, ScheduleAdminForm)
        user = signed_in_user(request.user)
        if change:
            saved = schedule_services.schedule_update(
                schedule=obj, user=user, fields=form.schedule_fields()
            )
        else:
            saved = schedule_services.schedule_create(
                owner=form.cleaned_data["owner"], fields=form.schedule_fields(), created_by=user
            )
        obj.pk = saved.pk
        obj.refresh_from_db()

    @admin.action(description=_("Pause the selected schedules"))
    def pause(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        for schedule in queryset.select_related("owner"):
            schedule_services.schedule_pause(schedule=schedule, user=schedule.owner)
        self._done(request, queryset.count())

    @admin.action(description=_("Resume the selected schedules"))
    def resume(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        for schedule in queryset.select_related("owner"):
            schedule_services.schedule_resume(schedule=schedule, user=schedule.owner)
        self._done(request, queryset.count())

    def _done(self, request: HttpRequest, count: int) -> None:
        text = ngettext("%(count)d schedule changed.", "%(count)d schedules changed.", count)
        self.message_user(request, text % {"count": count}, messages.SUCCESS)


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["kind", "user", "run", "schedule", "created_at", "read_at"]
    list_filter = ["kind"]
    list_select_related = ["user", "run", "schedule"]
    fields = ["kind", "user", "run", "conversation", "schedule", "detail", "created_at", "read_at"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["webhook", "notification", "status", "attempts", "response_status"]
    list_filter = ["status"]
    list_select_related = ["webhook", "notification"]
    fields = [
        "webhook",
        "notification",
        "status",
        "attempts",
        "response_status",
        "error",
        "created_at",
        "last_attempt_at",
    ]
