"""Every user's schedules, their firings, notifications and webhook deliveries, for staff.

Read-only but for the actions: staff pause and resume a schedule (as its owner would, through
agents/services/schedules.py), and a firing is never written here, only by a beat tick or
"Run now".
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agents.admin.pages import ReadOnlyAdminMixin
from agents.models import Notification, Schedule, ScheduleFiring, WebhookDelivery
from agents.recurrence import describe
from agents.services import schedules as schedule_services


class ScheduleFiringInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ScheduleFiring
    fields = ["occurrence", "run", "budget_steps", "error", "fired_at"]
    extra = 0
    max_num = 0
    ordering = ["-occurrence"]


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["title", "owner", "profile", "when", "next_fire_at", "paused_at"]
    list_filter = [("profile", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["owner", "profile"]
    search_fields = ["title", "prompt", "owner__username"]
    fields = [
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
        "created_at",
        "updated_at",
    ]
    inlines = [ScheduleFiringInline]
    actions = ["pause", "resume"]

    @admin.display(description=_("When"))
    def when(self, obj: Schedule) -> str:
        return describe(rule=obj.rrule, starts_at=obj.starts_at, time_zone=obj.time_zone)

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # The actions need it; the form stays read-only (ReadOnlyAdminMixin's fields).
        return bool(request.user.is_staff)

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
