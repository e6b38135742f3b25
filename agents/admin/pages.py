"""What the admin's modules share: extra per-object pages, read-only admins, and showing
chat messages and JSON on a page."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.views.decorators.debug import sensitive_post_parameters


class ExtraPagesAdmin(admin.ModelAdmin):
    """Per-object pages under ``<id>/<name>/``, wrapped by ``admin_view`` (staff only); and
    the change form's extras: more template context, and POST fields a crash report leaves
    out (write-only secrets)."""

    sensitive_post_fields: tuple[str, ...] = ()

    def change_form_context(self) -> dict[str, Any]:
        return {}

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        view = super().changeform_view
        if self.sensitive_post_fields:
            view = sensitive_post_parameters(*self.sensitive_post_fields)(view)
        extra_context = {**(extra_context or {}), **self.change_form_context()}
        return view(request, object_id, form_url, extra_context)

    def _object_url(self, route: str, view: Callable[..., Any], name: str) -> URLPattern:
        url_name = f"{self.opts.app_label}_{self.opts.model_name}_{name}"
        return path(route, self.admin_site.admin_view(view), name=url_name)

    def _get_for_view(self, request: HttpRequest, object_id: int) -> Any:
        obj = get_object_or_404(self.model, pk=object_id)
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        return obj

    def _get_for_change(self, request: HttpRequest, object_id: int) -> Any:
        obj = get_object_or_404(self.model, pk=object_id)
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        return obj

    def page_context(self, request: HttpRequest, obj: Model, title: str) -> dict[str, Any]:
        """What the admin's templates expect on an extra page of ``obj``."""
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": obj,
            "title": title,
            "has_view_permission": self.has_view_permission(request, obj),
        }


class UserBoundFormAdmin(admin.ModelAdmin):
    """An admin whose form takes the signed-in user (``user=``): what it may set up depends
    on who asks (a stdio MCP server runs a program, which only superusers may)."""

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        form_class = super().get_form(request, obj, change, **kwargs)
        user = request.user

        class FormForUser(form_class):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **form_kwargs: Any) -> None:
                super().__init__(*args, user=user, **form_kwargs)

        return FormForUser


class ReadOnlyAdminMixin:
    """Nothing here can be added, changed or deleted; every declared field shows read-only
    (computed ones included), so the layout is written once, in ``fieldsets`` or ``fields``."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = getattr(self, "fieldsets", None)
        if fieldsets:
            return flatten_fieldsets(fieldsets)
        return getattr(self, "fields", None) or super().get_readonly_fields(request, obj)  # type: ignore[misc]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def change_url(obj: Model) -> str:
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class DisplayMessage:
    role: str
    content: str
    extra: str  # anything else in the message (tool calls, names) as JSON, or ""


def display_messages(messages: Iterable[dict[str, Any]]) -> list[DisplayMessage]:
    """Chat messages as the pages show them: role, text, and any other keys as JSON."""
    return [
        DisplayMessage(
            role=str(message.get("role", "")),
            content=_content_text(message.get("content")),
            extra=_extra_json(message),
        )
        for message in messages
    ]


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return pretty(content)


def _extra_json(message: dict[str, Any]) -> str:
    extra = {key: value for key, value in message.items() if key not in ("role", "content")}
    return pretty(extra) if extra else ""
