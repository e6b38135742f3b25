"""Configured tools: kind, JSON config checked against the kind's schema, write-only
secrets, and "Test tool" (one real call, with the change permission)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.admin.forms import (
    TestToolForm,
    ToolConfigForm,
    describe_stored_secrets,
    may_run_programs,
)
from agents.admin.openapi import openapi_import_view
from agents.admin.pages import ExtraPagesAdmin, UserBoundFormAdmin
from agents.models import ToolConfig
from agents.permissions import signed_in_user
from agents.services.tools import tool_config_run_once
from agents.tools.builtin.mcp_tool import runs_program
from agents.tools.registry import tool_kinds


def _calls_a_program(tool_config: ToolConfig) -> bool:
    return tool_config.kind == "mcp" and runs_program(tool_config.config or {})


@admin.register(ToolConfig)
class ToolConfigAdmin(UserBoundFormAdmin, ExtraPagesAdmin):
    form = ToolConfigForm
    list_display = [
        "name",
        "kind",
        "enabled",
        "return_direct",
        "needs_approval",
        "timeout_seconds",
        "secrets_state",
        "availability",
    ]
    list_filter = ["kind", "enabled", "needs_approval"]
    search_fields = ["name", "description"]
    change_form_template = "admin/agents/toolconfig/change_form.html"
    change_list_template = "admin/agents/toolconfig/change_list.html"
    sensitive_post_fields = ("secrets",)
    fieldsets = [
        (None, {"fields": ["name", "kind", "description", "enabled"]}),
        (_("Configuration"), {"fields": ["config"]}),
        (_("Secrets (write-only)"), {"fields": ["secrets", "clear_secrets"]}),
        (
            _("Behaviour"),
            {"fields": ["timeout_seconds", "return_direct", "needs_approval", "read_only"]},
        ),
    ]

    @admin.display(description=_("Secrets"))
    def secrets_state(self, obj: ToolConfig) -> str:
        return describe_stored_secrets(obj)

    @admin.display(description=_("Available"))
    def availability(self, obj: ToolConfig) -> str:
        kind = tool_kinds().get(obj.kind)
        if kind is None:
            return gettext("No: the kind is no longer registered")
        reason = kind.unavailable_reason()
        return gettext("No: %(reason)s") % {"reason": reason} if reason else gettext("Yes")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Changing or testing a tool of a stdio server runs a program on this machine.
        if obj is not None and _calls_a_program(obj) and not may_run_programs(request.user):
            return False
        return super().has_change_permission(request, obj)

    def change_form_context(self) -> dict[str, Any]:
        kinds = [
            {
                "kind": name,
                "summary": kind.summary,
                "secret_names": kind.secret_names,
                "unavailable": kind.unavailable_reason(),
                "schema": json.dumps(kind.config_schema, indent=2, ensure_ascii=False),
            }
            for name, kind in sorted(tool_kinds().items())
        ]
        return {"tool_kinds": kinds}

    def get_urls(self) -> list[URLPattern]:
        import_openapi = self.admin_site.admin_view(partial(openapi_import_view, model_admin=self))
        return [
            self._object_url("<int:object_id>/test/", self.test_view, "test"),
            path("import-openapi/", import_openapi, name="agents_toolconfig_import_openapi"),
            *super().get_urls(),
        ]

    def test_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        # Testing calls the tool for real (an HTTP tool sends its request): change permission.
        tool_config = self._get_for_change(request, object_id)
        form = TestToolForm(request.POST or None)
        result = None
        if request.method == "POST" and form.is_valid():
            result = tool_config_run_once(
                tool_config=tool_config,
                tool_input=form.cleaned_data["sample_input"],
                user=signed_in_user(request.user),
            )
        context = {
            **self.page_context(
                request, tool_config, gettext("Test tool: %(name)s") % {"name": tool_config.name}
            ),
            "form": form,
            "result": result,
        }
        return TemplateResponse(request, "admin/agents/toolconfig/test_tool.html", context)
