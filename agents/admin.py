"""Django admin for chatsite: model endpoints, profiles (prompts), tools, the run inspector,
conversations, the knowledge base and the usage page.

Staff only (Django admin refuses everyone else), every change lands in the admin log. The
extra pages live in ``agents/admin_views.py``; this module routes to them after checking the
model permission. API keys and tool secrets are write-only (``agents/forms.py``), and the
admin's POST data is marked sensitive so a crash report cannot carry them either.
"""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.views.decorators.debug import sensitive_post_parameters

from agents import admin_views
from agents.forms import (
    AgentProfileForm,
    KnowledgeDocumentForm,
    ModelConfigForm,
    ToolConfigForm,
    describe_stored_secrets,
)
from agents.models import (
    AgentProfile,
    AgentRun,
    Conversation,
    KnowledgeDocument,
    MemorySummary,
    Message,
    ModelConfig,
    PromptVersion,
    ToolConfig,
)
from agents.react.prompt import default_template
from agents.services.knowledge import (
    KnowledgeIngestError,
    knowledge_document_delete,
    knowledge_document_ingest,
)
from agents.services.profiles import profile_save, prompt_version_ensure
from agents.tools.registry import tool_kinds


class ExtraPagesMixin:
    """Per-object pages under ``<id>/<name>/``, wrapped by ``admin_view`` (staff only)."""

    def _object_url(self, route: str, view, name: str):
        url_name = f"{self.opts.app_label}_{self.opts.model_name}_{name}"
        return path(route, self.admin_site.admin_view(view), name=url_name)

    def _get_for_view(self, request, object_id: int):
        obj = get_object_or_404(self.model, pk=object_id)
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        return obj

    def _get_for_change(self, request, object_id: int):
        obj = get_object_or_404(self.model, pk=object_id)
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        return obj


# --------------------------------------------------------------------------------------
# Model endpoints
# --------------------------------------------------------------------------------------


@admin.register(ModelConfig)
class ModelConfigAdmin(ExtraPagesMixin, admin.ModelAdmin):
    form = ModelConfigForm
    list_display = ["name", "model", "endpoint", "api_key_state", "context_window", "prices"]
    search_fields = ["name", "model", "base_url"]
    actions = ["check_connection"]
    change_form_template = "admin/agents/modelconfig/change_form.html"
    fieldsets = [
        (None, {"fields": ["name", "base_url", "model"]}),
        ("API key (write-only)", {"fields": ["api_key", "clear_api_key"]}),
        (
            "Behaviour",
            {
                "fields": [
                    "default_temperature",
                    "context_window",
                    "request_timeout_seconds",
                    "max_retries",
                ]
            },
        ),
        (
            "Prices per million tokens",
            {"fields": ["prompt_price_per_million", "completion_price_per_million"]},
        ),
    ]

    @admin.display(description="Endpoint")
    def endpoint(self, obj: ModelConfig) -> str:
        return obj.base_url or "built-in demo model"

    @admin.display(description="API key")
    def api_key_state(self, obj: ModelConfig) -> str:
        return "set" if obj.has_api_key else "not set"

    @admin.display(description="Prompt / completion price")
    def prices(self, obj: ModelConfig) -> str:
        return f"{obj.prompt_price_per_million:g} / {obj.completion_price_per_million:g}"

    @method_decorator(sensitive_post_parameters("api_key"))
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return super().changeform_view(request, object_id, form_url, extra_context)

    @admin.action(description="Check connection", permissions=["change"])
    def check_connection(self, request, queryset):
        for model_config in queryset:
            result = admin_views.check_connection(model_config)
            level = messages.SUCCESS if result.ok else messages.ERROR
            self.message_user(request, f"{model_config.name}: {result.message}", level)

    def get_urls(self):
        return [
            self._object_url("<int:object_id>/check/", self.check_view, "check"),
            *super().get_urls(),
        ]

    def check_view(self, request, object_id: int):
        model_config = self._get_for_change(request, object_id)
        return admin_views.model_config_check(request, self, model_config)


# --------------------------------------------------------------------------------------
# Agent profiles and their versions
# --------------------------------------------------------------------------------------


class PromptVersionInline(admin.TabularInline):
    model = PromptVersion
    fields = ["number", "created_by", "created_at", "compare"]
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = False
    verbose_name_plural = "Versions (newest first; every save writes one)"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("created_by").order_by("-number")

    @admin.display(description="")
    def compare(self, obj: PromptVersion) -> str:
        url = reverse("admin:agents_agentprofile_version", args=[obj.profile_id, obj.number])
        return format_html('<a href="{}">diff and restore</a>', url)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AgentProfile)
class AgentProfileAdmin(ExtraPagesMixin, admin.ModelAdmin):
    form = AgentProfileForm
    list_display = ["name", "slug", "mode", "model_config", "tool_count", "is_default", "latest"]
    list_filter = ["mode", "label_set", "is_default", "model_config"]
    search_fields = ["name", "slug", "description"]
    prepopulated_fields = {"slug": ["name"]}
    filter_horizontal = ["tools", "allowed_groups"]
    inlines = [PromptVersionInline]
    change_form_template = "admin/agents/agentprofile/change_form.html"
    fieldsets = [
        (None, {"fields": ["name", "slug", "description", "make_default", "allowed_groups"]}),
        ("Model", {"fields": ["mode", "model_config", "temperature"]}),
        (
            "Prompt",
            {
                "fields": ["system_prompt", "label_set", "few_shot_examples"],
                "description": "Leave the template empty to use the default for the mode "
                "and label set. Unknown or missing variables are refused on save.",
            },
        ),
        ("Tools and limits", {"fields": ["tools", "max_iterations", "max_execution_time"]}),
        (
            "Memory",
            {"fields": ["memory_strategy", "memory_window_turns", "memory_token_budget"]},
        ),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_tool_count=Count("tools", distinct=True))

    @admin.display(description="Tools", ordering="_tool_count")
    def tool_count(self, obj: AgentProfile) -> int:
        return obj._tool_count

    @admin.display(description="Version")
    def latest(self, obj: AgentProfile) -> str:
        number = obj.versions.order_by("-number").values_list("number", flat=True).first()
        return f"v{number}" if number else "—"

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
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
        extra_context = {**(extra_context or {}), "default_templates": templates}
        return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        profile_save(profile=obj, is_default=form.cleaned_data.get("make_default", False))

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        # After the tools are saved: the snapshot includes them.
        prompt_version_ensure(profile=form.instance, user=request.user)

    def get_urls(self):
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

    def preview_view(self, request, object_id: int):
        profile = self._get_for_view(request, object_id)
        return admin_views.profile_preview(request, self, profile)

    def try_view(self, request, object_id: int):
        # Runs the model and the tools: a change permission, not just view.
        profile = self._get_for_change(request, object_id)
        return admin_views.profile_try(request, self, profile)

    def versions_view(self, request, object_id: int):
        profile = self._get_for_view(request, object_id)
        return admin_views.profile_versions(request, self, profile)

    def version_view(self, request, object_id: int, number: int):
        profile = self._get_for_view(request, object_id)
        return admin_views.profile_version_detail(request, self, profile, number)

    def restore_view(self, request, object_id: int, number: int):
        profile = self._get_for_change(request, object_id)
        return admin_views.profile_version_restore(request, self, profile, number)


class ReadOnlyAdminMixin:
    """Nothing here can be added, changed or deleted; every declared field shows read-only
    (computed ones included), so the layout is written once, in ``fieldsets`` or ``fields``."""

    def get_readonly_fields(self, request, obj=None):
        if self.fieldsets:
            return flatten_fieldsets(self.fieldsets)
        return self.fields or super().get_readonly_fields(request, obj)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PromptVersion)
class PromptVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: versions are immutable. Restoring happens on the profile's version page."""

    list_display = ["__str__", "profile", "number", "created_by", "created_at", "compare"]
    list_filter = [("profile", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["profile", "created_by"]
    fields = ["profile", "number", "created_by", "created_at", "snapshot_pretty", "compare"]

    @admin.display(description="Snapshot")
    def snapshot_pretty(self, obj: PromptVersion) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.snapshot, indent=2, ensure_ascii=False))

    @admin.display(description="Diff")
    def compare(self, obj: PromptVersion) -> str:
        url = reverse("admin:agents_agentprofile_version", args=[obj.profile_id, obj.number])
        return format_html('<a href="{}">diff against previous</a>', url)


# --------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------


@admin.register(ToolConfig)
class ToolConfigAdmin(ExtraPagesMixin, admin.ModelAdmin):
    form = ToolConfigForm
    list_display = ["name", "kind", "enabled", "return_direct", "timeout_seconds", "secrets_state"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "description"]
    change_form_template = "admin/agents/toolconfig/change_form.html"
    fieldsets = [
        (None, {"fields": ["name", "kind", "description", "enabled"]}),
        ("Configuration", {"fields": ["config"]}),
        ("Secrets (write-only)", {"fields": ["secrets", "clear_secrets"]}),
        ("Behaviour", {"fields": ["timeout_seconds", "return_direct"]}),
    ]

    @admin.display(description="Secrets")
    def secrets_state(self, obj: ToolConfig) -> str:
        return describe_stored_secrets(obj)

    @method_decorator(sensitive_post_parameters("secrets"))
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        kinds = [
            {
                "kind": name,
                "summary": kind.summary,
                "secret_names": kind.secret_names,
                "schema": json.dumps(kind.config_schema, indent=2, ensure_ascii=False),
            }
            for name, kind in sorted(tool_kinds().items())
        ]
        extra_context = {**(extra_context or {}), "tool_kinds": kinds}
        return super().changeform_view(request, object_id, form_url, extra_context)

    def get_urls(self):
        return [
            self._object_url("<int:object_id>/test/", self.test_view, "test"),
            *super().get_urls(),
        ]

    def test_view(self, request, object_id: int):
        # Testing calls the tool for real (an HTTP tool sends its request): change permission.
        tool_config = self._get_for_change(request, object_id)
        return admin_views.tool_test(request, self, tool_config)


# --------------------------------------------------------------------------------------
# Read-only: runs (the inspector) and conversations
# --------------------------------------------------------------------------------------


@admin.register(AgentRun)
class AgentRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "status",
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
    list_select_related = ["conversation__owner", "profile_version__profile"]
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
            "Timing and tokens",
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
        ("Error", {"fields": ["error_code", "error_message", "error_detail"]}),
    ]

    @admin.display(description="User", ordering="conversation__owner__username")
    def owner(self, obj: AgentRun) -> str:
        return obj.conversation.owner.get_username()

    @admin.display(description="Profile")
    def profile(self, obj: AgentRun) -> str:
        return str(obj.profile_version) if obj.profile_version else "—"

    @admin.display(description="Conversation")
    def conversation_link(self, obj: AgentRun) -> str:
        url = reverse("admin:agents_conversation_change", args=[obj.conversation_id])
        return format_html('<a href="{}">{}</a>', url, obj.conversation)

    @admin.display(description="Duration")
    def duration(self, obj: AgentRun) -> str:
        seconds = obj.duration_seconds
        return f"{seconds:.2f} s" if seconds is not None else "—"

    def change_view(self, request, object_id, form_url="", extra_context=None):
        run = self.get_object(request, object_id)
        if run is not None:
            extra_context = {**(extra_context or {}), **admin_views.run_inspector_context(run)}
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self):
        usage = self.admin_site.admin_view(self.usage_view)
        return [path("usage/", usage, name="agents_agentrun_usage"), *super().get_urls()]

    def usage_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return admin_views.usage_view(request, self)


class MessageInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Message
    fk_name = "conversation"
    fields = ["id", "role", "content", "run", "created_at"]
    extra = 0


class MemorySummaryInline(ReadOnlyAdminMixin, admin.StackedInline):
    model = MemorySummary
    fields = ["text", "covers_from", "covers_through", "token_count", "model_name", "created_at"]
    extra = 0
    verbose_name_plural = "Memory summaries (newest first; the newest is in use)"


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "title", "owner", "profile", "archived", "updated_at"]
    list_filter = ["archived", ("owner", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["title", "owner__username"]
    list_select_related = ["owner", "profile"]
    fields = ["title", "owner", "profile", "archived", "last_seq", "created_at", "updated_at"]
    inlines = [MessageInline, MemorySummaryInline]


# --------------------------------------------------------------------------------------
# Knowledge base
# --------------------------------------------------------------------------------------


@admin.register(KnowledgeDocument)
class KnowledgeDocumentAdmin(admin.ModelAdmin):
    list_display = ["title", "collection", "chunk_count", "updated_at"]
    list_filter = ["collection"]
    search_fields = ["title", "text"]
    form = KnowledgeDocumentForm
    fields = ["title", "collection", "source_file", "text"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_chunk_count=Count("chunks"))

    @admin.display(description="Chunks", ordering="_chunk_count")
    def chunk_count(self, obj: KnowledgeDocument) -> int:
        return obj._chunk_count

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        try:
            chunks = knowledge_document_ingest(document=obj)
        except (KnowledgeIngestError, OSError) as exc:
            # The form checked a new upload; this is a stored file gone bad. Keep the edit.
            self.message_user(
                request, f"{obj.title} was saved but could not be indexed: {exc}", messages.ERROR
            )
            return
        self.message_user(request, f"{obj.title}: indexed as {chunks} passage(s).")

    def delete_model(self, request, obj):
        knowledge_document_delete(document=obj)

    def delete_queryset(self, request, queryset):
        # One by one: the SQLite search index is kept beside the rows, not cascaded.
        for document in queryset:
            knowledge_document_delete(document=document)
