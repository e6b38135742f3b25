"""Every user's API keys, for staff: who made which, with what scopes, when it was last
used; revoke one or many (agents/services/api_keys.py). Keys are made by their owners on
their own page (agents/views.py), so staff never see a secret: there is none to see."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agents.models import ApiKey
from agents.services.api_keys import api_key_revoke


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "prefix", "scopes", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "owner__username"]
    list_select_related = ["owner"]
    readonly_fields = [
        "owner",
        "name",
        "prefix",
        "scopes",
        "created_at",
        "last_used_at",
        "revoked_at",
        "revoked_by",
    ]
    fields = [*readonly_fields[:4], "requests_per_minute", *readonly_fields[4:]]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description=_("Revoke the selected keys"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = 0
        for key in queryset.filter(revoked_at__isnull=True):
            api_key_revoke(key=key, by=request.user)  # type: ignore[arg-type]
            revoked += 1
        self.message_user(
            request,
            ngettext("%(count)d key revoked.", "%(count)d keys revoked.", revoked)
            % {"count": revoked},
            messages.SUCCESS,
        )
