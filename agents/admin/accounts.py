"""Which identity provider account each user signs in as (single sign-on, agents/sso.py).

Read-only: a row is made at a user's first sign-in through the provider and goes with the
user; the user's groups and staff flag are edited on the user's own page (and set again
from the provider's claims at the next sign-in)."""

from __future__ import annotations

from django.contrib import admin

from agents.admin.pages import ReadOnlyAdminMixin
from agents.models import ProviderIdentity


@admin.register(ProviderIdentity)
class ProviderIdentityAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["user", "subject", "issuer", "created_at"]
    list_filter = ["issuer"]
    list_select_related = ["user"]
    search_fields = ["user__username", "user__email", "subject"]
    fields = ["user", "issuer", "subject", "created_at"]
