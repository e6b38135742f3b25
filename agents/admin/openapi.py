"""Import an OpenAPI 3 document as tools: paste or upload it, set the server URL, tick the
operations, enter each auth scheme's secret once (write-only), and one ``openapi`` tool is
made per operation. Reached from the tools list ("Import OpenAPI")."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_post_parameters

from agents.admin.forms import WriteOnlyPasswordInput, new_tool_name_error, suggested_tool_name
from agents.models import ToolConfig
from agents.services.openapi import (
    ImportChoice,
    ImportRefused,
    needs_approval_by_default,
    openapi_tools_import,
)
from agents.tools.openapi import (
    OpenApiDocumentError,
    Operation,
    SecurityScheme,
    operations,
    read_document,
)

MAX_DOCUMENT_BYTES = 2_000_000


class OpenApiDocumentForm(forms.Form):
    document = forms.CharField(
        required=False,
        widget=forms.Textarea(
            attrs={"rows": 14, "class": "vLargeTextField", "spellcheck": "false"}
        ),
        help_text=_("The OpenAPI 3 document, JSON or YAML. Or upload it below."),
    )
    document_file = forms.FileField(required=False, label=_("…or upload it"))
    server_url = forms.URLField(
        assume_scheme="https",
        help_text=_(
            "Where the API is, e.g. https://api.example.com/v1 (the document's own "
            "servers are not trusted; an operation that names an absolute server of its own "
            "is checked like this one)."
        ),
    )
    allow_hosts = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_(
            "Internal hosts these tools may reach, one per line (host or host:port). "
            "Any other private, loopback or link-local address is refused."
        ),
    )
    timeout_seconds = forms.FloatField(initial=10.0, min_value=0.1, max_value=300)

    def clean_allow_hosts(self) -> list[str]:
        return [
            line.strip() for line in self.cleaned_data["allow_hosts"].splitlines() if line.strip()
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        upload = cleaned.get("document_file")
        text = cleaned.get("document") or ""
        if upload is not None:
            if upload.size > MAX_DOCUMENT_BYTES:
                raise forms.ValidationError(
                    gettext("The document is over %(limit)d bytes.") % {"limit": MAX_DOCUMENT_BYTES}
                )
            text = upload.read().decode("utf-8", errors="replace")
            # Shown again on the next step, so the upload need not be repeated.
            shown = self.data.copy()  # type: ignore[attr-defined]
            shown["document"] = text
            self.data = shown
        if not text.strip():
            raise forms.ValidationError(_("Paste the document or upload it."))
        try:
            cleaned["parsed"] = read_document(text)
        except OpenApiDocumentError as exc:
            self.add_error("document", str(exc))
        cleaned["document"] = text
        return cleaned


class OperationsForm(forms.Form):
    """Which operations become tools, under which names, and the secret of each scheme."""

    def __init__(self, *args: Any, found: list[Operation], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.found = found
        taken = set(ToolConfig.objects.values_list("name", flat=True))
        for index, operation in enumerate(found):
            self.fields[f"op_{index}"] = forms.BooleanField(
                required=False, disabled=bool(operation.unsupported), label=operation.key
            )
            self.fields[f"opname_{index}"] = forms.CharField(
                max_length=64,
                required=False,
                initial=suggested_tool_name(operation.tool_name, taken),
                label=gettext("Tool name for %(name)s") % {"name": operation.key},
            )
            self.fields[f"opapproval_{index}"] = forms.BooleanField(
                required=False,
                initial=needs_approval_by_default(operation),
                label=gettext("Needs approval: %(operation)s") % {"operation": operation.key},
            )
        for scheme in self.schemes():
            self.fields[f"secret_{scheme.secret_name}"] = forms.CharField(
                required=False,
                widget=WriteOnlyPasswordInput(),
                label=f"{scheme.key} ({_style_label(scheme)})",
                help_text=_("Stored encrypted on each tool that uses it; never shown again."),
            )

    def schemes(self) -> list[SecurityScheme]:
        seen: dict[str, SecurityScheme] = {}
        for operation in self.found:
            for scheme in operation.schemes:
                seen.setdefault(scheme.secret_name, scheme)
        return list(seen.values())

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "operation": operation,
                "enable": self[f"op_{index}"],
                "name": self[f"opname_{index}"],
                "needs_approval": self[f"opapproval_{index}"],
                "auth": ", ".join(_style_label(s) for s in operation.schemes) or gettext("none"),
            }
            for index, operation in enumerate(self.found)
        ]

    def secret_fields(self) -> list[forms.BoundField]:
        return [self[f"secret_{scheme.secret_name}"] for scheme in self.schemes()]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        chosen: list[ImportChoice] = []
        names: set[str] = set()
        for index, operation in enumerate(self.found):
            if not cleaned.get(f"op_{index}"):
                continue
            name = (cleaned.get(f"opname_{index}") or "").strip()
            error = new_tool_name_error(name, chosen=names)
            if error:
                self.add_error(f"opname_{index}", error)
                continue
            names.add(name)
            chosen.append(
                ImportChoice(
                    operation=operation,
                    tool_name=name,
                    needs_approval=bool(cleaned.get(f"opapproval_{index}")),
                )
            )
        if not chosen and not self.errors:
            raise forms.ValidationError(_("Tick at least one operation to import."))
        cleaned["chosen"] = chosen
        cleaned["secrets"] = {
            scheme.secret_name: cleaned.get(f"secret_{scheme.secret_name}") or ""
            for scheme in self.schemes()
        }
        return cleaned


def _style_label(scheme: SecurityScheme) -> str:
    if scheme.style == "api_key_header":
        return gettext("API key in header %(name)s") % {"name": scheme.parameter}
    if scheme.style == "api_key_query":
        return gettext("API key in query parameter %(name)s") % {"name": scheme.parameter}
    return gettext("bearer token")


@sensitive_post_parameters()
def openapi_import_view(request: HttpRequest, *, model_admin: ModelAdmin) -> HttpResponse:
    """Step one reads and validates the document; step two (``operations`` posted) imports."""
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    document_form = OpenApiDocumentForm(request.POST or None, request.FILES or None)
    operations_form: OperationsForm | None = None
    error = ""
    if request.method == "POST" and document_form.is_valid():
        found = operations(document_form.cleaned_data["parsed"])
        second_step = request.POST.get("step") == "operations"
        operations_form = OperationsForm(request.POST if second_step else None, found=found)
        if second_step and operations_form.is_valid():
            try:
                created = openapi_tools_import(
                    choices=operations_form.cleaned_data["chosen"],
                    server_url=document_form.cleaned_data["server_url"],
                    allow_hosts=document_form.cleaned_data["allow_hosts"],
                    secrets=operations_form.cleaned_data["secrets"],
                    timeout_seconds=document_form.cleaned_data["timeout_seconds"],
                )
            except ImportRefused as exc:
                error = str(exc)
            else:
                names = ", ".join(tool.name for tool in created)
                messages.success(
                    request,
                    gettext(
                        "Imported %(names)s. Put them on agent profiles to let agents use them."
                    )
                    % {"names": names},
                )
                return HttpResponseRedirect(reverse("admin:agents_toolconfig_changelist"))
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": gettext("Import an OpenAPI document"),
        "document_form": document_form,
        "operations_form": operations_form,
        "import_error": error,
    }
    return TemplateResponse(request, "admin/agents/toolconfig/import_openapi.html", context)
