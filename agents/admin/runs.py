"""The run inspector (read-only): the step timeline and every model call with the exact
messages sent and what came back; replaying a run and comparing the replay with it; its
trace as JSON lines; and the usage page, per user and day."""

from __future__ import annotations

import csv
import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.admin.forms import ReplayForm, StaffUsageForm
from agents.admin.pages import ExtraPagesAdmin, ReadOnlyAdminMixin, display_messages, pretty
from agents.comparison import run_steps_compared
from agents.models import AgentRun, EvalSet
from agents.selectors import model_call_list, run_approvals, run_event_list
from agents.services.evaluations import EvalRefused, eval_case_from_run
from agents.services.replays import ReplayRefused, run_replay_start
from agents.services.usage import usage_by_user_day
from agents.traces import runs_trace_lines
from agents.usage_reports import UsageBy, UsageLine, usage_entries, usage_lines, usage_totals

QUESTION_CHARS = 80


@admin.register(AgentRun)
class AgentRunAdmin(ReadOnlyAdminMixin, ExtraPagesAdmin):
    list_display = [
        "id",
        "status",
        "replay_of",
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
        ("replay_of", admin.EmptyFieldListFilter),
        "created_at",
    ]
    actions = ["download_traces"]
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
                    "replay_of",
                    "replay_unrecorded",
                ]
            },
        ),
        (
            _("Sub-agent"),
            {"fields": ["parent_run", "parent_call_id", "task", "depth", "max_steps"]},
        ),
        (
            # What the run's prompt carried beside the question: the owner's custom
            # instructions, and the stopped answer a Continue goes on with.
            _("Added to the prompt"),
            {"fields": ["user_instructions", "continues_answer"]},
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
            if not run.is_replay:
                latest = (
                    run.profile_version.profile.versions.order_by("-number").first()
                    if run.profile_version
                    else None
                )
                extra_context["replay_form"] = ReplayForm(initial={"version": latest})
            extra_context["replays"] = run.replays.order_by("-pk")
            if not run.is_replay and run.is_terminal:
                extra_context["eval_sets"] = EvalSet.objects.select_related("profile").order_by(
                    "profile__name", "name"
                )
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self) -> list[URLPattern]:
        usage = self.admin_site.admin_view(self.usage_view)
        return [
            path("usage/", usage, name="agents_agentrun_usage"),
            self._object_url("<int:object_id>/replay/", self.replay_view, "replay"),
            self._object_url("<int:object_id>/compare/", self.compare_view, "compare"),
            self._object_url("<int:object_id>/add-case/", self.add_case_view, "add_case"),
            *super().get_urls(),
        ]

    @admin.action(description=_("Download the traces of the selected runs (JSON lines)"))
    def download_traces(
        self, request: HttpRequest, queryset: QuerySet[AgentRun]
    ) -> StreamingHttpResponse:
        runs = queryset.select_related("profile_version__profile", "conversation").order_by("pk")
        response = StreamingHttpResponse(
            runs_trace_lines(runs.iterator()), content_type="application/x-ndjson"
        )
        response["Content-Disposition"] = 'attachment; filename="run-traces.jsonl"'
        return response

    def replay_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Start a replay of the run (POST only; the form is on the run's page)."""
        run = self._get_for_view(request, object_id)
        if request.method != "POST":
            return HttpResponseRedirect(reverse("admin:agents_agentrun_change", args=[run.pk]))
        form = ReplayForm(request.POST)
        if not form.is_valid():
            said = "; ".join(str(error) for errors in form.errors.values() for error in errors)
            messages.error(
                request, gettext("The replay was not started: %(errors)s") % {"errors": said}
            )
            return HttpResponseRedirect(reverse("admin:agents_agentrun_change", args=[run.pk]))
        try:
            replay = run_replay_start(
                run=run,
                user=request.user,  # type: ignore[arg-type]
                version=form.cleaned_data["version"],
                model_config=form.cleaned_data["model_config"],
                unrecorded=form.cleaned_data["unrecorded"],
            )
        except ReplayRefused as refusal:
            messages.error(request, str(refusal))
            return HttpResponseRedirect(reverse("admin:agents_agentrun_change", args=[run.pk]))
        return HttpResponseRedirect(reverse("admin:agents_agentrun_compare", args=[replay.pk]))

    def add_case_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Make the run a case of the chosen evaluation set (POST; the form is on its page)."""
        run = self._get_for_view(request, object_id)
        back = reverse("admin:agents_agentrun_change", args=[run.pk])
        eval_set = EvalSet.objects.filter(pk=request.POST.get("eval_set") or 0).first()
        if request.method != "POST" or eval_set is None:
            if request.method == "POST":
                messages.error(request, gettext("Choose an evaluation set."))
            return HttpResponseRedirect(back)
        try:
            case = eval_case_from_run(run=run, eval_set=eval_set)
        except EvalRefused as refusal:
            messages.error(request, str(refusal))
            return HttpResponseRedirect(back)
        messages.success(
            request,
            gettext("The run is the case “%(case)s” of the set “%(set)s”.")
            % {"case": case.name, "set": eval_set.name},
        )
        return HttpResponseRedirect(reverse("admin:agents_evalset_change", args=[eval_set.pk]))

    def compare_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """A replay beside its original, step by step; reloads itself while the replay runs."""
        replay = self._get_for_view(request, object_id)
        original = replay.replay_of
        if original is None:
            return HttpResponseRedirect(reverse("admin:agents_agentrun_change", args=[replay.pk]))
        context = {
            **self.page_context(request, replay, gettext("Replay compared with its original")),
            "original_run": original,
            "replay": replay,
            "rows": run_steps_compared(original=original, replay=replay),
            "running": not replay.is_terminal,
        }
        return TemplateResponse(request, "admin/agents/agentrun/compare.html", context)

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = StaffUsageForm(request.GET or None)
        since, until = form.date_range()
        grouping = form.grouping()
        if request.GET.get("format") == "csv":
            return _usage_csv(since=since, until=until, grouping=grouping)
        lines: list[UsageLine] = []
        rows = []
        if grouping is None:
            rows = usage_by_user_day(since=since, until=until)
        else:
            lines = usage_lines(entries=usage_entries(since=since, until=until), by=grouping)
        query = request.GET.copy()
        query["format"] = "csv"
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": gettext("Usage and cost"),
            "form": form,
            "rows": rows,
            "lines": lines,
            "grouping": grouping,
            "totals": usage_totals(entries=usage_entries(since=since, until=until)),
            "currency": settings.CHAT_CURRENCY,
            "csv_query": query.urlencode(),
            "since": since,
            "until_exclusive": until,
        }
        return TemplateResponse(request, "admin/agents/usage.html", context)


def _usage_csv(
    *, since: datetime.datetime, until: datetime.datetime, grouping: UsageBy | None
) -> HttpResponse:
    """The usage page's rows as CSV: one row per user and day, or per the grouping asked
    for, with the range and the currency in every row so a file stands on its own."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    last_day = (until - datetime.timedelta(days=1)).date()
    name = f"usage-{since.date().isoformat()}-{last_day.isoformat()}"
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    writer = csv.writer(response)
    head = ["runs", "prompt_tokens", "completion_tokens", "total_tokens", "cost", "currency"]
    currency = settings.CHAT_CURRENCY
    if grouping is None:
        writer.writerow(["day", "user", *head])
        for row in usage_by_user_day(since=since, until=until):
            writer.writerow(
                [
                    row.day.isoformat(),
                    _csv_safe(row.username),
                    row.runs,
                    row.prompt_tokens,
                    row.completion_tokens,
                    row.total_tokens,
                    row.cost,
                    currency,
                ]
            )
        return response
    writer.writerow([grouping.value, *head])
    for line in usage_lines(entries=usage_entries(since=since, until=until), by=grouping):
        writer.writerow(
            [
                _csv_safe(line.label),
                line.runs,
                line.prompt_tokens,
                line.completion_tokens,
                line.total_tokens,
                line.cost.quantize(_MICRO),
                currency,
            ]
        )
    return response


_MICRO = Decimal("0.000001")


def _csv_safe(text: str) -> str:
    """A name a spreadsheet would read as a formula (=, +, -, @ first) is quoted with '."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _inspector_context(run: AgentRun) -> dict[str, Any]:
    """The step timeline and every model call of a run, for its page. A call that started a
    sub-agent's run has that run's timeline under it, however deep."""
    events = _timeline(run)
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


def _timeline(run: AgentRun) -> list[dict[str, Any]]:
    children = {child.parent_call_id: child for child in run.child_runs.order_by("pk")}
    timeline = []
    for event in run_event_list(run=run):
        payload = event.payload if isinstance(event.payload, dict) else {}
        kind = payload.get("kind", "")
        child = children.get(payload.get("call_id", "")) if kind == "action" else None
        timeline.append(
            {
                "seq": event.seq,
                "type": event.type,
                "created_at": event.created_at,
                "kind": kind,
                "payload": pretty(event.payload),
                "child": child,
                "child_url": reverse("admin:agents_agentrun_change", args=[child.pk])
                if child
                else "",
                "child_events": _timeline(child) if child else [],
            }
        )
    return timeline
