"""KnowledgeDocument admin: an upload is checked, indexed on save, and searchable."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from agents.models import KnowledgeChunk, KnowledgeDocument
from agents.services.knowledge import knowledge_search
from tests.admin.conftest import page_text


@pytest.fixture(autouse=True)
def _media_in_tmp(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def _post(client, **fields):
    data = {"title": "Holiday policy", "collection": "handbook", "text": ""}
    data.update(fields)
    return client.post(reverse("admin:agents_knowledgedocument_add"), data)


@pytest.mark.django_db
def test_uploaded_markdown_is_indexed_and_searchable(staff_client):
    upload = SimpleUploadedFile(
        "holidays.md",
        b"# Holidays\n\nEvery employee gets twenty-eight days of paid leave a year.\n",
        content_type="text/markdown",
    )
    response = _post(staff_client, source_file=upload)

    assert response.status_code == 302, page_text(response)
    document = KnowledgeDocument.objects.get(title="Holiday policy")
    assert "twenty-eight days" in document.text
    assert document.chunks.count() >= 1
    hits = knowledge_search(collection="handbook", query="paid leave")
    assert [hit.document_id for hit in hits][:1] == [document.pk]
    listing = page_text(staff_client.get(reverse("admin:agents_knowledgedocument_changelist")))
    assert "Holiday policy" in listing


@pytest.mark.django_db
def test_pasted_text_is_indexed(staff_client):
    response = _post(staff_client, text="Expenses are reimbursed within thirty days.")
    assert response.status_code == 302
    document = KnowledgeDocument.objects.get(title="Holiday policy")
    assert document.chunks.count() == 1


@pytest.mark.django_db
def test_unreadable_upload_is_a_form_error_and_nothing_is_saved(staff_client):
    upload = SimpleUploadedFile("tool.exe", b"MZ\x00\x00binary", content_type="application/x")
    response = _post(staff_client, source_file=upload)

    assert response.status_code == 200
    assert "only .txt, .md and .pdf files can be indexed" in page_text(response)
    assert not KnowledgeDocument.objects.filter(title="Holiday policy").exists()


@pytest.mark.django_db
def test_neither_file_nor_text_is_refused(staff_client):
    response = _post(staff_client)
    assert "Upload a file (.txt, .md or .pdf) or paste the text." in page_text(response)


@pytest.mark.django_db
def test_deleting_a_document_removes_its_passages(staff_client):
    _post(staff_client, text="Expenses are reimbursed within thirty days.")
    document = KnowledgeDocument.objects.get(title="Holiday policy")

    response = staff_client.post(
        reverse("admin:agents_knowledgedocument_delete", args=[document.pk]), {"post": "yes"}
    )

    assert response.status_code == 302
    assert not KnowledgeChunk.objects.filter(document_id=document.pk).exists()
    assert knowledge_search(collection="handbook", query="reimbursed") == []
