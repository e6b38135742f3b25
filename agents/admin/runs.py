"""The run inspector (read-only): the step timeline and every model call with the exact
messages sent and what came back; and the usage page, per user and day."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.admin.forms import UsageRangeForm
from agents.admin.pages import ReadOnlyAdminMixin, display_messages, pretty
from agents.models import AgentRun
from agents.selectors import model_call_list, run_approvals, run_event_list
from agents.services.usage import usage_by_user_day

QUESTION_CHARS = 80


@admin.register(AgentRun)
class AgentRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "status",
        "question",
        "owner",
        "profile",
        "model_name",
        "prompt_tokens",
        "completion_tokens",
        "duration",
        "created_at",
    ]
    list_filter = [
        "status",
        ("profile_version__profile", admin.RelatedOnlyFieldListFilter),
        ("conversation__owner", admin.RelatedOnlyFieldListFilter),
        "created_at",
    ]
    search_fields = ["conversation__owner__username", "error_message", "model_name"]
    date_hierarchy = "created_at"
    list_select_related = ["conversation__owner", "profile_version__profile", "trigger_message"]
    change_form_template = "admin/agents/agentrun/change_form.html"
    change_list_template = "admin/agents/agentrun/change_list.html"
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "status",
                    "conversation_link",
                    "owner",
                    "trigger_message",
                    "profile_version",
                    "model_config",
                    "model_name",
                    "mode",
                ]
            },
        ),
        (
            _("Timing and tokens"),
            {
                "fields": [
                    "created_at",
                    "started_at",
                    "finished_at",
                    "duration",
                    "prompt_tokens",
                    "completion_tokens",
                    "attempts",
                    "worker_id",
                    "heartbeat_at",
                    "cancel_requested_at",
                ]
            },
        ),
        (_("Error"), {"fields": ["error_code", "error_message", "error_detail"]}),
    ]

    @admin.display(description=_("User"), ordering="conversation__owner__username")
    def owner(self, obj: AgentRun) -> str:
        return obj.conversation.owner.get_username()

    # What the run answers, cut short: the list is for finding a run, the inspector shows it whole.
    @admin.display(description=_("Question"))
    def question(self, obj: AgentRun) -> str:
        if obj.trigger_message is None:
            return "—"
        text = Truncator(" ".join(obj.trigger_message.content.split())).chars(QUESTION_CHARS)
        return format_html('<span class="run-question">{}</span>', text)

    @admin.display(description=_("Profile"))
    def profile(self, obj: AgentRun) -> str:
        return str(obj.profile_version) if obj.profile_version else "—"

    @admin.display(description=_("Conversation"))
    def conversation_link(self, obj: AgentRun) -> str:
        url = reverse("admin:agents_conversation_change", args=[obj.conversation_id])
        return format_html('<a href="{}">{}</a>', url, obj.conversation)

    @admin.display(description=_("Duration"))
    def duration(self, obj: AgentRun) -> str:
        seconds = obj.duration_seconds
        return gettext("%(seconds).2f s") % {"seconds": seconds} if seconds is not None else "—"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self.get_object(request, object_id)
        if run is not None:
            extra_context = {**(extra_context or {}), **_inspector_context(run)}
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self) -> list[URLPattern]:
        usage = self.admin_site.admin_view(self.usage_view)
        return [path("usage/", usage, name="agents_agentrun_usage"), *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = UsageRangeForm(request.GET or None)
        since, until = form.date_range()
        rows = usage_by_user_day(since=since, until=until)
        totals = {
            "runs": sum(row.runs for row in rows),
            "prompt_tokens": sum(row.prompt_tokens for row in rows),
            "completion_tokens": sum(row.completion_tokens for row in rows),
            "cost": sum((row.cost for row in rows), start=Decimal(0)),
        }
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": gettext("Usage per user and day"),
            "form": form,
            "rows": rows,
            "totals": totals,
            "since": since,
            "until_exclusive": until,
        }
        return TemplateResponse(request, "admin/agents/usage.html", context)


def _inspector_context(run: AgentRun) -> dict[str, Any]:
    """The step timeline and every model call of a run, for its page."""
    events = [
        {
            "seq": event.seq,
            "type": event.type,
            "created_at": event.created_at,
            "kind": event.payload.get("kind", "") if isinstance(event.payload, dict) else "",
            "payload": pretty(event.payload),
        }
        for event in run_event_list(run=run)
    ]
    calls = [
        {
            "call": call,
            "messages": display_messages(call.request_messages or []),
            "options": pretty(call.request_options) if call.request_options else "",
            "tool_calls": pretty(call.response_tool_calls) if call.response_tool_calls else "",
        }
        for call in model_call_list(run=run)
    ]
    approvals = [
        {"approval": approval, "tool_input": pretty(approval.tool_input)}
        for approval in run_approvals(run=run)
    ]
    return {"run_events": events, "model_calls": calls, "run_approvals": approvals}
