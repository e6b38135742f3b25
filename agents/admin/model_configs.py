"""Model endpoints: a write-only API key, and "Check connection" on the page and the list."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.admin.forms import ModelConfigForm
from agents.admin.pages import ExtraPagesAdmin, change_url
from agents.format_stats import parse_errors_by_model
from agents.llm.check import check_connection
from agents.models import ModelConfig

FORMAT_STATS_DAYS = 30


@admin.register(ModelConfig)
class ModelConfigAdmin(ExtraPagesAdmin):
    form = ModelConfigForm
    list_display = ["name", "model", "endpoint", "api_key_state", "context_window", "prices"]
    search_fields = ["name", "model", "base_url"]
    actions = ["check_connection"]
    change_form_template = "admin/agents/modelconfig/change_form.html"
    change_list_template = "admin/agents/modelconfig/change_list.html"
    sensitive_post_fields = ("api_key",)
    fieldsets = [
        (None, {"fields": ["name", "base_url", "model"]}),
        (_("API key (write-only)"), {"fields": ["api_key", "clear_api_key"]}),
        (
            _("Behaviour"),
            {
                "fields": [
                    "default_temperature",
                    "context_window",
                    "request_timeout_seconds",
                    "max_retries",
                    "supports_tool_calling",
                    "for_embeddings",
                ]
            },
        ),
        (
            _("Prices per million tokens"),
            {
                "fields": ["prompt_price_per_million", "completion_price_per_million"],
                "description": _(
                    "In the site's currency (CHAT_CURRENCY). A run is priced as its endpoint "
                    "was when it was sent: a change here prices later runs only."
                ),
            },
        ),
    ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Which models keep to the ReAct format: the figures staff choose a model's mode by.
        until = timezone.now()
        context = {
            "format_days": FORMAT_STATS_DAYS,
            "format_rows": parse_errors_by_model(
                since=until - timedelta(days=FORMAT_STATS_DAYS), until=until
            ),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)

    @admin.display(description=_("Endpoint"))
    def endpoint(self, obj: ModelConfig) -> str:
        return obj.base_url or gettext("built-in demo model")

    @admin.display(description=_("API key"))
    def api_key_state(self, obj: ModelConfig) -> str:
        return gettext("set") if obj.has_api_key else gettext("not set")

    @admin.display(description=_("Prompt / completion price"))
    def prices(self, obj: ModelConfig) -> str:
        return f"{obj.prompt_price_per_million:g} / {obj.completion_price_per_million:g}"

    @admin.action(description=_("Check connection"), permissions=["change"])
    def check_connection(self, request: HttpRequest, queryset: QuerySet[ModelConfig]) -> None:
        for model_config in queryset:
            self._report_check(request, model_config)

    def get_urls(self) -> list[URLPattern]:
        return [
            self._object_url("<int:object_id>/check/", self.check_view, "check"),
            *super().get_urls(),
        ]

    def check_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        model_config = self._get_for_change(request, object_id)
        if request.method == "POST":
            self._report_check(request, model_config)
        return HttpResponseRedirect(change_url(model_config))

    def _report_check(self, request: HttpRequest, model_config: ModelConfig) -> None:
        result = check_connection(model_config)
        level = messages.SUCCESS if result.ok else messages.ERROR
        self.message_user(request, f"{model_config.name}: {result.message}", level)
