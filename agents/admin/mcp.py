"""MCP servers: write-only headers, stdio for superusers only, state and last error, and
"Discover", which lists the server's tools and enables the chosen ones as ``mcp`` tools."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.admin.forms import (
    BoundedJSONField,
    WriteOnlyTextarea,
    may_run_programs,
    new_tool_name_error,
    suggested_tool_name,
)
from agents.admin.pages import ExtraPagesAdmin, UserBoundFormAdmin, change_url, pretty
from agents.crypto import SecretUnreadable
from agents.models import McpServer, ToolConfig
from agents.services.mcp import (
    mcp_server_discover,
    mcp_server_environment_update,
    mcp_server_headers_update,
    mcp_server_tools,
    mcp_tools_enable,
)
from agents.tools.mcp_client import RemoteTool, needs_approval_by_default

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _runs_program(server: McpServer | None) -> bool:
    return server is not None and server.transport == McpServer.Transport.STDIO


def describe_headers(server: McpServer) -> str:
    """The names of the stored headers, never their values."""
    return _describe_names(server.headers_encrypted, server.get_headers)


def describe_environment(server: McpServer) -> str:
    """The names of the stored environment variables, never their values."""
    return _describe_names(server.environment_encrypted, server.get_environment)


def _describe_names(encrypted: str, stored: Any) -> str:
    if not encrypted:
        return gettext("none")
    try:
        return ", ".join(sorted(stored())) or gettext("none")
    except SecretUnreadable:
        return gettext("unreadable (SECRET_KEY changed since they were saved): enter them again")


def _write_only_lines(
    text: str, *, separator: str, name_pattern: re.Pattern[str], form_message: str
) -> dict[str, str]:
    """``Name<separator>value`` lines as a dict; an empty value removes that name."""
    entered: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(separator)
        # Messages name the line, never echo it: it may hold the secret.
        if not sep or not name_pattern.match(name.strip()):
            raise forms.ValidationError(form_message % {"number": number})
        entered[name.strip()] = value.strip()
    return entered


class McpServerForm(forms.ModelForm):
    headers = forms.CharField(
        label=_("Headers"),
        required=False,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        help_text=_(
            "One Name: value per line, sent with every request (e.g. Authorization: Bearer …). "
            "Write-only: leave empty to keep the stored ones; Name: with nothing after it "
            "removes one."
        ),
    )
    clear_headers = forms.BooleanField(label=_("Remove all stored headers"), required=False)
    environment = forms.CharField(
        label=_("Environment"),
        required=False,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        help_text=_(
            "stdio: one NAME=value per line, set for the program (e.g. an API token it needs), "
            "instead of putting secrets in its arguments, which anyone who may view this "
            "server reads. Write-only: leave empty to keep the stored ones; NAME= with nothing "
            "after it removes one."
        ),
    )
    clear_environment = forms.BooleanField(
        label=_("Remove all stored environment variables"), required=False
    )
    url = forms.URLField(
        required=False,
        assume_scheme="https",
        help_text=_("Streamable HTTP: the endpoint, e.g. https://tools.example.com/mcp"),
    )
    args = BoundedJSONField(
        required=False,
        initial=list,
        widget=forms.Textarea(attrs={"rows": 2, "class": "vLargeTextField"}),
        help_text=_('stdio: the arguments as a JSON list, e.g. ["server.py", "--quiet"].'),
    )

    class Meta:
        model = McpServer
        fields = ["name", "transport", "url", "headers", "clear_headers", "command", "args"]
        fields += ["environment", "clear_environment", "timeout_seconds"]

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["headers"].help_text = (
            gettext("Stored headers: %(names)s.") % {"names": describe_headers(self.instance)}
            + " "
            + str(self.fields["headers"].help_text)
        )
        self.fields["environment"].help_text = (
            gettext("Stored variables: %(names)s.") % {"names": describe_environment(self.instance)}
            + " "
            + str(self.fields["environment"].help_text)
        )

    def clean_args(self) -> list[Any]:
        value = self.cleaned_data.get("args")
        return [] if value is None else value

    def clean_headers(self) -> dict[str, str]:
        return _write_only_lines(
            self.cleaned_data.get("headers", ""),
            separator=":",
            name_pattern=_HEADER_NAME,
            form_message=gettext("Line %(number)d is not Name: value."),
        )

    def clean_environment(self) -> dict[str, str]:
        return _write_only_lines(
            self.cleaned_data.get("environment", ""),
            separator="=",
            name_pattern=_VARIABLE_NAME,
            form_message=gettext("Line %(number)d is not NAME=value."),
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        runs_program = cleaned.get("transport") == McpServer.Transport.STDIO
        was_stdio = self.instance.pk and self.instance.transport == McpServer.Transport.STDIO
        sets_environment = cleaned.get("environment") or cleaned.get("clear_environment")
        if sets_environment and not runs_program:
            self.add_error("environment", _("Environment variables are for stdio servers only."))
        if (runs_program or was_stdio) and not may_run_programs(self.user):
            raise forms.ValidationError(
                _(
                    "Only a superuser may create or change a stdio server: it runs a program "
                    "on the worker's machine."
                )
            )
        return cleaned

    def save(self, commit: bool = True) -> McpServer:
        server: McpServer = super().save(commit=False)
        mcp_server_headers_update(
            server=server,
            entered=self.cleaned_data.get("headers") or {},
            clear_all=bool(self.cleaned_data.get("clear_headers")),
        )
        mcp_server_environment_update(
            server=server,
            entered=self.cleaned_data.get("environment") or {},
            clear_all=bool(self.cleaned_data.get("clear_environment")),
        )
        if commit:
            server.save()
        return server


class EnableToolsForm(forms.Form):
    """One checkbox and one name per discovered tool; names are checked for clashes."""

    timeout_seconds = forms.FloatField(
        initial=30.0, min_value=0.1, help_text=_("Each call's timeout, in seconds.")
    )

    def __init__(
        self, *args: Any, tools: list[RemoteTool], enabled: dict[str, str], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.tools = tools
        taken = set(ToolConfig.objects.values_list("name", flat=True))
        for index, tool in enumerate(tools):
            already = enabled.get(tool.name)
            self.fields[f"enable_{index}"] = forms.BooleanField(
                required=False,
                disabled=already is not None,
                label=gettext("Enable %(name)s") % {"name": tool.name},
            )
            self.fields[f"name_{index}"] = forms.CharField(
                max_length=64,
                required=False,
                initial=already or suggested_tool_name(tool.name, taken),
                disabled=already is not None,
                label=gettext("Tool name for %(name)s") % {"name": tool.name},
            )

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "tool": tool,
                "enable": self[f"enable_{index}"],
                "name": self[f"name_{index}"],
                "schema": pretty(tool.input_schema),
                "annotations": pretty(tool.annotations) if tool.annotations else "",
                "needs_approval": needs_approval_by_default(tool.annotations),
            }
            for index, tool in enumerate(self.tools)
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        chosen: list[tuple[RemoteTool, str]] = []
        for index, tool in enumerate(self.tools):
            field = self.fields[f"enable_{index}"]
            if field.disabled or not cleaned.get(f"enable_{index}"):
                continue
            name = (cleaned.get(f"name_{index}") or "").strip()
            error = new_tool_name_error(name, chosen={n for _, n in chosen})
            if error:
                self.add_error(f"name_{index}", error)
                continue
            chosen.append((tool, name))
        if not chosen and not self.errors:
            raise forms.ValidationError(_("Tick at least one tool to enable."))
        cleaned["chosen"] = chosen
        return cleaned


@admin.register(McpServer)
class McpServerAdmin(UserBoundFormAdmin, ExtraPagesAdmin):
    form = McpServerForm
    list_display = ["name", "transport", "target", "state", "last_contact_at", "headers_state"]
    list_filter = ["transport", "state"]
    search_fields = ["name", "url", "command"]
    readonly_fields = ["state", "last_error", "last_contact_at", "enabled_tools"]
    change_form_template = "admin/agents/mcpserver/change_form.html"
    sensitive_post_fields = ("headers", "environment")
    fieldsets = [
        (None, {"fields": ["name", "transport", "timeout_seconds"]}),
        (_("Streamable HTTP"), {"fields": ["url", "headers", "clear_headers"]}),
        (
            _("stdio (superusers only)"),
            {"fields": ["command", "args", "environment", "clear_environment"]},
        ),
        (_("State"), {"fields": ["state", "last_error", "last_contact_at", "enabled_tools"]}),
    ]

    @admin.display(description=_("URL or command"))
    def target(self, obj: McpServer) -> str:
        if obj.transport == McpServer.Transport.STDIO:
            return " ".join([obj.command, *map(str, obj.args or [])])
        return obj.url

    @admin.display(description=_("Headers"))
    def headers_state(self, obj: McpServer) -> str:
        return describe_headers(obj)

    @admin.display(description=_("Tools enabled from it"))
    def enabled_tools(self, obj: McpServer) -> str:
        enabled = mcp_server_tools(server=obj)
        return ", ".join(f"{local} ({remote})" for remote, local in enabled.items()) or gettext(
            "none"
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if _runs_program(obj) and not may_run_programs(request.user):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if _runs_program(obj) and not may_run_programs(request.user):
            return False
        return super().has_delete_permission(request, obj)

    def get_urls(self) -> list[URLPattern]:
        return [
            self._object_url("<int:object_id>/discover/", self.discover_view, "discover"),
            *super().get_urls(),
        ]

    def discover_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """GET shows the page and contacts nobody; a POST asks the server for its tools
        ("discover") or enables the ticked ones. Contacting a server starts a stdio program
        or sends a request from this machine: the change permission on the server (a
        superuser's, for stdio), and the add permission on tools to enable any."""
        if request.method != "POST":
            server: McpServer = self._get_for_view(request, object_id)
            discovery = None
            form = None
        else:
            server = self._get_for_change(request, object_id)
            enabling = "discover" not in request.POST
            if enabling and not request.user.has_perm("agents.add_toolconfig"):
                raise PermissionDenied
            discovery = mcp_server_discover(server=server)
            server.refresh_from_db()
            form = EnableToolsForm(
                request.POST if enabling else None,
                tools=discovery.tools,
                enabled=mcp_server_tools(server=server),
            )
            if enabling and form.is_valid():
                created = mcp_tools_enable(
                    server=server,
                    choices=form.cleaned_data["chosen"],
                    timeout_seconds=form.cleaned_data["timeout_seconds"],
                )
                names = ", ".join(tool.name for tool in created)
                messages.success(
                    request,
                    gettext("Enabled %(names)s. Put them on agent profiles to let agents use them.")
                    % {"names": names},
                )
                return HttpResponseRedirect(reverse("admin:agents_toolconfig_changelist"))
        context = {
            **self.page_context(
                request, server, gettext("Discover: %(name)s") % {"name": server.name}
            ),
            "server": server,
            "discovery": discovery,
            "form": form,
            "rows": form.rows() if form is not None else [],
            "may_contact": self.has_change_permission(request, server),
            "server_url": change_url(server),
        }
        return TemplateResponse(request, "admin/agents/mcpserver/discover.html", context)
