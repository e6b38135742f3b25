"""Agent profiles and their versions: the prompt, a preview of the exact first request,
"Try it", and each version's diff with a restore button."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.admin.forms import AgentProfileForm, PreviewForm, VersionRestoreForm
from agents.admin.pages import (
    ExtraPagesAdmin,
    ReadOnlyAdminMixin,
    change_url,
    display_messages,
    pretty,
)
from agents.admin.profile_try import page as try_it_page
from agents.models import AgentProfile, PromptVersion
from agents.permissions import signed_in_user
from agents.react.prompt import default_template
from agents.services.evaluations import EvalGateRefused
from agents.services.profiles import profile_preview, profile_save, profile_save_as_draft
from agents.services.prompt_versions import (
    prompt_version_diff,
    prompt_version_ensure,
    prompt_version_gated,
    prompt_version_live,
    prompt_version_newest,
    prompt_version_publish,
)


class PromptVersionInline(admin.TabularInline):
    model = PromptVersion
    fields = ["number", "is_draft", "created_by", "created_at", "compare"]
    readonly_fields = ["number", "is_draft", "created_by", "created_at", "compare"]
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = False
    verbose_name_plural = _(
        "Versions (newest first; every save writes one, a draft while the evaluation gate "
        "holds the profile)"
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[PromptVersion]:
        return super().get_queryset(request).select_related("created_by").order_by("-number")

    @admin.display(description="")
    def compare(self, obj: PromptVersion) -> str:
        url = reverse("admin:agents_agentprofile_version", args=[obj.profile_id, obj.number])
        return format_html('<a href="{}">{}</a>', url, gettext("diff and restore"))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AgentProfile)
class AgentProfileAdmin(ExtraPagesAdmin):
    form = AgentProfileForm
    list_display = [
        "name",
        "slug",
        "mode",
        "model_config",
        "tool_count",
        "is_default",
        "latest",
        "feedback",
    ]
    list_filter = ["mode", "label_set", "is_default", "model_config"]
    search_fields = ["name", "slug", "description"]
    prepopulated_fields = {"slug": ["name"]}
    filter_horizontal = ["tools", "allowed_groups"]
    inlines = [PromptVersionInline]
    change_form_template = "admin/agents/agentprofile/change_form.html"
    fieldsets = [
        (None, {"fields": ["name", "slug", "description", "make_default", "allowed_groups"]}),
        (_("Starting points"), {"fields": ["suggested_prompts"]}),
        (_("Model"), {"fields": ["mode", "model_config", "temperature"]}),
        (
            _("Prompt"),
            {
                "fields": ["system_prompt", "label_set", "few_shot_examples"],
                "description": "Leave the template empty to use the default for the mode "
                "and label set. Unknown or missing variables are refused on save.",
            },
        ),
        (
            _("Tools and limits"),
            {
                "fields": [
                    "tools",
                    "max_iterations",
                    "max_execution_time",
                    "budget_steps",
                    "budget_tokens",
                    "budget_tool_calls",
                ]
            },
        ),
        (
            _("Memory"),
            {"fields": ["memory_strategy", "memory_window_turns", "memory_token_budget"]},
        ),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentProfile]:
        return super().get_queryset(request).annotate(_tool_count=Count("tools", distinct=True))

    @admin.display(description=_("Tools"), ordering="_tool_count")
    def tool_count(self, obj: AgentProfile) -> int:
        return int(obj._tool_count)  # type: ignore[attr-defined]  # annotated in get_queryset

    @admin.display(description=_("Version"))
    def latest(self, obj: AgentProfile) -> str:
        live = prompt_version_live(profile=obj)
        return f"v{live.number}" if live else "—"

    @admin.display(description=_("Feedback"))
    def feedback(self, obj: AgentProfile) -> str:
        url = reverse("admin:agents_answerfeedback_profile_stats", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, gettext("by version"))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        profile = self.get_object(request, object_id)
        if profile is not None:
            newest = prompt_version_newest(profile=profile)
            live = prompt_version_live(profile=profile)
            waiting = newest is not None and newest.is_draft and newest != live
            extra_context = {**(extra_context or {}), "waiting_draft": newest if waiting else None}
        return super().change_view(request, object_id, form_url, extra_context)

    def change_form_context(self) -> dict[str, Any]:
        # The default templates, to copy from when writing a custom one.
        templates = [
            {
                "mode": mode.label,
                "label_set": label_set.label,
                "text": default_template(mode.value, label_set.value),
            }
            for mode in AgentProfile.Mode
            for label_set in AgentProfile.LabelSet
        ]
        return {"default_templates": templates}

    def save_model(
        self, request: HttpRequest, obj: AgentProfile, form: ModelForm[AgentProfile], change: bool
    ) -> None:
        if prompt_version_gated(profile=obj):
            return  # saved as a draft with its tools, in save_related
        profile_save(profile=obj, is_default=form.cleaned_data.get("make_default", False))

    def save_related(
        self, request: HttpRequest, form: ModelForm[AgentProfile], formsets: Any, change: bool
    ) -> None:
        profile = form.instance
        if prompt_version_gated(profile=profile):
            self._save_as_draft(request, form, formsets, change)
            return
        super().save_related(request, form, formsets, change)
        # After the tools are saved: the snapshot includes them.
        prompt_version_ensure(profile=profile, user=signed_in_user(request.user))

    def _save_as_draft(
        self, request: HttpRequest, form: ModelForm[AgentProfile], formsets: Any, change: bool
    ) -> None:
        """The evaluation gate holds the profile: what runs read goes into a draft version,
        live once it is published (agents/services/prompt_versions.py)."""
        profile = form.instance
        draft = profile_save_as_draft(
            profile=profile,
            tools=form.cleaned_data.get("tools") or [],
            is_default=form.cleaned_data.get("make_default", False),
            user=signed_in_user(request.user),
        )
        profile.allowed_groups.set(form.cleaned_data.get("allowed_groups") or [])
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)
        if draft is None:
            return
        live = prompt_version_live(profile=profile)
        url = reverse("admin:agents_agentprofile_version", args=[profile.pk, draft.number])
        self.message_user(
            request,
            format_html(
                '{} <a href="{}">{}</a>',
                gettext(
                    "The evaluation gate is on: your changes were saved as draft version "
                    "%(draft)d, and runs still use version %(live)d. Run the profile's "
                    "evaluation sets against the draft, then publish it."
                )
                % {"draft": draft.number, "live": live.number if live else 0},
                url,
                gettext("See and publish version %(number)d") % {"number": draft.number},
            ),
            messages.WARNING,
        )

    def get_urls(self) -> list[URLPattern]:
        return [
            self._object_url("<int:object_id>/preview/", self.preview_view, "preview"),
            self._object_url("<int:object_id>/try/", self.try_view, "try"),
            self._object_url("<int:object_id>/versions/", self.versions_view, "versions"),
            self._object_url(
                "<int:object_id>/versions/<int:number>/", self.version_view, "version"
            ),
            self._object_url(
                "<int:object_id>/versions/<int:number>/restore/",
                self.restore_view,
                "version_restore",
            ),
            *super().get_urls(),
        ]

    def preview_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        profile = self._get_for_view(request, object_id)
        user = signed_in_user(request.user)
        # Only conversations this user may read: the preview shows their memory.
        form = PreviewForm(request.POST or None, user=user)
        preview = None
        if request.method == "POST" and form.is_valid():
            result = profile_preview(
                profile=profile,
                user=user,
                question=form.cleaned_data["question"],
                memory_summary=form.cleaned_data["memory_summary"],
                history=form.cleaned_data["history"],
                conversation=form.cleaned_data["conversation"],
            )
            preview = {
                "messages": display_messages(result.messages),
                "options": pretty(result.options) if result.options else "",
                "problems": result.problems,
            }
        context = {
            **self.page_context(
                request, profile, gettext("Preview: %(name)s") % {"name": profile.name}
            ),
            "form": form,
            "preview": preview,
        }
        return TemplateResponse(request, "admin/agents/agentprofile/preview.html", context)

    def try_view(self, request: HttpRequest, object_id: int) -> HttpResponseBase:
        # Runs the model and the tools: a change permission, not just view.
        profile = self._get_for_change(request, object_id)
        return try_it_page(request, self, profile)

    def versions_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        profile = self._get_for_view(request, object_id)
        versions = list(profile.versions.select_related("created_by").order_by("-number"))
        context = {
            **self.page_context(
                request, profile, gettext("Versions of %(name)s") % {"name": profile.name}
            ),
            "versions": versions,
            "live_pk": getattr(prompt_version_live(profile=profile), "pk", None),
            "can_restore": self.has_change_permission(request, profile),
        }
        return TemplateResponse(request, "admin/agents/agentprofile/versions.html", context)

    def version_view(self, request: HttpRequest, object_id: int, number: int) -> HttpResponse:
        profile = self._get_for_view(request, object_id)
        version = get_object_or_404(PromptVersion, profile=profile, number=number)
        live = prompt_version_live(profile=profile)
        context = {
            **self.page_context(
                request,
                profile,
                gettext("%(name)s: version %(number)d") % {"name": profile.name, "number": number},
            ),
            "version": version,
            "diff": prompt_version_diff(version=version),
            "snapshot_json": pretty(version.snapshot),
            "is_latest": live is not None and number == live.number,
            "can_restore": self.has_change_permission(request, profile),
            "restore_form": VersionRestoreForm(),
        }
        return TemplateResponse(request, "admin/agents/agentprofile/version_detail.html", context)

    def restore_view(self, request: HttpRequest, object_id: int, number: int) -> HttpResponse:
        profile = self._get_for_change(request, object_id)
        version = get_object_or_404(PromptVersion, profile=profile, number=number)
        if request.method != "POST":
            return HttpResponseRedirect(
                reverse("admin:agents_agentprofile_version", args=[profile.pk, number])
            )
        try:
            result = prompt_version_publish(
                version=version, profile=profile, user=signed_in_user(request.user)
            )
        except EvalGateRefused as refusal:
            self.message_user(request, str(refusal), messages.ERROR)
            return HttpResponseRedirect(
                reverse("admin:agents_agentprofile_version", args=[profile.pk, number])
            )
        profile.refresh_from_db()
        if result.version.number == number:
            text = gettext("Published version %(number)d: runs use it now.") % {"number": number}
        else:
            text = gettext("Restored version %(old)d as version %(new)d.") % {
                "old": number,
                "new": result.version.number,
            }
        self.log_change(request, profile, [{"changed": {"fields": ["restored", text]}}])
        self.message_user(request, text, messages.SUCCESS)
        if result.missing_tools:
            self.message_user(
                request,
                gettext("These tools no longer exist and were left out: %(names)s")
                % {"names": ", ".join(result.missing_tools)},
                messages.WARNING,
            )
        if result.missing_model_config:
            self.message_user(
                request,
                gettext(
                    "The model endpoint of that version no longer exists; the profile now uses "
                    "the default model."
                ),
                messages.WARNING,
            )
        return HttpResponseRedirect(change_url(profile))


@admin.register(PromptVersion)
class PromptVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: versions are immutable. Restoring happens on the profile's version page."""

    list_display = ["__str__", "profile", "number", "created_by", "created_at", "compare"]
    list_filter = [("profile", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["profile", "created_by"]
    fields = ["profile", "number", "created_by", "created_at", "snapshot_pretty", "compare"]

    @admin.display(description=_("Snapshot"))
    def snapshot_pretty(self, obj: PromptVersion) -> str:
        return format_html("<pre>{}</pre>", pretty(obj.snapshot))

    @admin.display(description=_("Diff"))
    def compare(self, obj: PromptVersion) -> str:
        url = reverse("admin:agents_agentprofile_version", args=[obj.profile_id, obj.number])
        return format_html('<a href="{}">{}</a>', url, gettext("diff against previous"))
