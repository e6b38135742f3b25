"""The knowledge base that ``knowledge_search`` tools search: uploads indexed on save."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from agents.admin.forms import KnowledgeDocumentForm
from agents.models import KnowledgeDocument
from agents.services.knowledge import (
    KnowledgeIngestError,
    knowledge_document_delete,
    knowledge_document_ingest,
)


@admin.register(KnowledgeDocument)
class KnowledgeDocumentAdmin(admin.ModelAdmin):
    list_display = ["title", "collection", "chunk_count", "updated_at"]
    list_filter = ["collection"]
    search_fields = ["title", "text"]
    form = KnowledgeDocumentForm
    fields = ["title", "collection", "source_file", "text"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_chunk_count=Count("chunks"))

    @admin.display(description=_("Chunks"), ordering="_chunk_count")
    def chunk_count(self, obj: KnowledgeDocument) -> int:
        return obj._chunk_count  # type: ignore[attr-defined]  # annotated in get_queryset

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        try:
            chunks = knowledge_document_ingest(document=obj)
        except (KnowledgeIngestError, OSError) as exc:
            # The form checked a new upload; this is a stored file gone bad. Keep the edit.
            self.message_user(
                request,
                gettext("%(title)s was saved but could not be indexed: %(error)s")
                % {"title": obj.title, "error": exc},
                messages.ERROR,
            )
            return
        self.message_user(
            request,
            ngettext(
                "%(title)s: indexed as %(count)d passage.",
                "%(title)s: indexed as %(count)d passages.",
                chunks,
            )
            % {"title": obj.title, "count": chunks},
        )

    def delete_model(self, request, obj):
        knowledge_document_delete(document=obj)

    def delete_queryset(self, request, queryset):
        # One by one: the SQLite search index is kept beside the rows, not cascaded.
        for document in queryset:
            knowledge_document_delete(document=document)
