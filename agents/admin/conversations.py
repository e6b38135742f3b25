"""Conversations, read-only: their messages and memory summaries."""

from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from agents.admin.pages import ReadOnlyAdminMixin
from agents.models import Conversation, MemorySummary, Message


class MessageInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Message
    fk_name = "conversation"
    fields = ["id", "role", "content", "run", "created_at"]
    extra = 0


class MemorySummaryInline(ReadOnlyAdminMixin, admin.StackedInline):
    model = MemorySummary
    fields = ["text", "covers_from", "covers_through", "token_count", "model_name", "created_at"]
    extra = 0
    verbose_name_plural = _("Memory summaries (newest first; each serves branches through its cut)")


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "title", "owner", "profile", "archived", "updated_at"]
    list_filter = ["archived", ("owner", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["title", "owner__username"]
    list_select_related = ["owner", "profile"]
    fields = ["title", "owner", "profile", "archived", "last_seq", "created_at", "updated_at"]
    inlines = [MessageInline, MemorySummaryInline]
