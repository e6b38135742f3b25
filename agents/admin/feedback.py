"""Feedback on answers: every rating with its comment, and a page comparing prompt versions
(count, share of thumbs up, latest comments) so staff can see which version people like."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents import selectors
from agents.admin.pages import ReadOnlyAdminMixin, change_url
from agents.models import AgentProfile, AnswerFeedback


@admin.register(AnswerFeedback)
class AnswerFeedbackAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: feedback belongs to the readers who gave it."""

    list_display = ["rating", "short_comment", "profile", "version", "user", "updated_at"]
    list_filter = ["rating", ("profile", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["profile", "prompt_version", "user"]
    search_fields = ["comment"]
    fields = ["rating", "comment", "answer", "profile", "prompt_version", "user", "updated_at"]
    change_list_template = "admin/agents/answerfeedback/change_list.html"

    @admin.display(description=_("Comment"))
    def short_comment(self, obj: AnswerFeedback) -> str:
        return obj.comment[:80] + ("…" if len(obj.comment) > 80 else "")

    @admin.display(description=_("Version"), ordering="prompt_version__number")
    def version(self, obj: AnswerFeedback) -> str:
        return f"v{obj.prompt_version.number}" if obj.prompt_version else "—"

    @admin.display(description=_("Answer"))
    def answer(self, obj: AnswerFeedback) -> str:
        return format_html("<pre>{}</pre>", obj.message.content)

    def get_urls(self) -> list[URLPattern]:
        stats = self.admin_site.admin_view(self.stats_view)
        return [
            path("by-version/", stats, name="agents_answerfeedback_stats"),
            path("by-version/<int:profile_id>/", stats, name="agents_answerfeedback_profile_stats"),
            *super().get_urls(),
        ]

    def stats_view(self, request: HttpRequest, profile_id: int | None = None) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        profile = get_object_or_404(AgentProfile, pk=profile_id) if profile_id else None
        title = (
            gettext("Feedback on %(name)s by version") % {"name": profile.name}
            if profile
            else gettext("Feedback by version")
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "profile": profile,
            "profile_url": change_url(profile) if profile else "",
            "stats": selectors.feedback_stats(profile=profile),
            "eval_sets": profile.eval_sets.order_by("name") if profile else [],
        }
        return TemplateResponse(request, "admin/agents/answerfeedback/stats.html", context)
