"""Knowledge base: ingest text, Markdown and PDF; search cites the right document.

Runs on whichever database the suite uses: PostgreSQL full-text search or SQLite FTS5.
"""

from __future__ import annotations

import itertools

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import KnowledgeChunk, KnowledgeDocument
from agents.services.knowledge import (
    FTS_TABLE,
    KnowledgeIngestError,
    chunk_text,
    knowledge_document_delete,
    knowledge_document_ingest,
    knowledge_search,
)
from agents.tools.builtin.knowledge_search import KnowledgeSearch

# Run on SQLite too (make test-sqlite): the search is FTS5 there, PostgreSQL's own here.
pytestmark = [pytest.mark.django_db, pytest.mark.smoke]


def tiny_pdf(lines: list[str]) -> bytes:
    """A one-page PDF with Helvetica text, xref offsets computed so readers accept it."""
    text_ops = " ".join(f"({line}) Tj 0 -16 Td" for line in lines)
    stream = f"BT /F1 12 Tf 72 720 Td {text_ops} ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref_at = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref_at,
    )
    return bytes(out)


RETURNS_MD = """# Returns policy

Items can be returned within 30 days of delivery for a full refund.

## Damaged goods

If a parcel arrives damaged, photograph it and contact support within 48 hours. We send a
replacement at no cost, or refund the purchase if you prefer.
"""

SHIPPING_TEXT = """Shipping times

Standard shipping takes 3 to 5 working days within the country.

Express shipping arrives the next working day when ordered before noon.
"""

WARRANTY_PDF_LINES = [
    "Warranty terms",
    "Every kettle carries a two year warranty against manufacturing faults.",
    "The warranty does not cover limescale buildup.",
]


@pytest.fixture
def library(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    returns = KnowledgeDocument.objects.create(
        title="Returns policy",
        source_file=SimpleUploadedFile("returns.md", RETURNS_MD.encode()),
    )
    shipping = KnowledgeDocument.objects.create(title="Shipping guide", text=SHIPPING_TEXT)
    warranty = KnowledgeDocument.objects.create(
        title="Kettle warranty",
        source_file=SimpleUploadedFile("warranty.pdf", tiny_pdf(WARRANTY_PDF_LINES)),
    )
    for document in (returns, shipping, warranty):
        assert knowledge_document_ingest(document=document) >= 1
    return {"returns": returns, "shipping": shipping, "warranty": warranty}


def test_ingest_extracts_text_from_markdown_and_pdf(library):
    library["returns"].refresh_from_db()
    library["warranty"].refresh_from_db()
    assert "photograph it and contact support" in library["returns"].text
    assert "two year warranty" in library["warranty"].text
    assert library["warranty"].chunks.count() == 1


def test_search_cites_the_document_that_answers(library):
    tool = KnowledgeSearch(config={"collection": "default", "max_results": 2})
    output = tool.run(query="damaged parcel refund")
    first_passage = output.split("\n\n")[0]
    assert first_passage.startswith("[Returns policy §")
    assert "photograph it" in first_passage


def test_search_finds_text_from_the_pdf(library):
    hits = knowledge_search(collection="default", query="kettle warranty", limit=3)
    assert hits[0].title == "Kettle warranty"
    assert hits[0].position == 1
    assert "two year warranty" in hits[0].text


def test_stemming_matches_other_word_forms(library):
    hits = knowledge_search(collection="default", query="shipped", limit=1)
    assert [hit.title for hit in hits] == ["Shipping guide"]


def test_a_question_with_extra_words_still_finds_the_passage(library):
    hits = knowledge_search(
        collection="default", query="how many days does express shipping usually need?", limit=1
    )
    assert hits[0].title == "Shipping guide"


def test_query_syntax_characters_are_harmless(library):
    for query in ['refund" OR (', "NEAR(a b) *", "-", "title:refund", "()"]:
        knowledge_search(collection="default", query=query, limit=3)
    assert knowledge_search(collection="default", query="   ", limit=3) == []


def test_no_match_is_said_plainly(library, settings):
    # By words alone: search by meaning always has a nearest passage
    # (tests/services/test_search_by_meaning.py).
    settings.CHAT_EMBEDDINGS = "off"
    assert KnowledgeSearch().run(query="submarine") == (
        "No passage in the knowledge base matches 'submarine'."
    )


def test_search_stays_inside_its_collection(library):
    other = KnowledgeDocument.objects.create(
        title="Internal refund notes", collection="staff", text="Refund fraud checklist."
    )
    knowledge_document_ingest(document=other)
    default_titles = {
        hit.title for hit in knowledge_search(collection="default", query="refund", limit=10)
    }
    # The other collection's passage is not found, however near it is in meaning.
    assert "Returns policy" in default_titles
    assert "Internal refund notes" not in default_titles
    staff = KnowledgeSearch(config={"collection": "staff"}).run(query="refund")
    assert staff.startswith("[Internal refund notes §1] Refund fraud checklist.")


def test_reingest_replaces_the_old_passages(library):
    shipping = library["shipping"]
    shipping.text = "Parcels now travel by drone.\n\nDrones fly on weekdays only."
    shipping.save()
    knowledge_document_ingest(document=shipping)
    found = knowledge_search(collection="default", query="express", limit=5)
    assert not [hit for hit in found if "xpress" in hit.text]
    hit = knowledge_search(collection="default", query="drone", limit=5)[0]
    assert (hit.title, hit.text) == ("Shipping guide", shipping.text)
    assert KnowledgeChunk.objects.filter(document=shipping).count() == 1


def test_deleted_documents_are_no_longer_found(library):
    knowledge_document_delete(document=library["warranty"])
    found = knowledge_search(collection="default", query="warranty", limit=5)
    assert "Kettle warranty" not in {hit.title for hit in found}
    # Deleted without the service (the admin's cascade): still not returned.
    library["shipping"].delete()
    found = knowledge_search(collection="default", query="shipping", limit=5)
    assert {hit.title for hit in found} == {"Returns policy"}
    assert KnowledgeChunk.objects.filter(document__title="Shipping guide").count() == 0


def test_search_runs_on_the_databases_own_full_text_index(library, settings):
    """PostgreSQL full-text search or SQLite FTS5, each checked under its own database.

    CI runs the fast tests on both (``.ci/run``); any other database fails here. By words
    alone: search by meaning would find the passages the full-text search misses.
    """
    settings.CHAT_EMBEDDINGS = "off"
    checks = {"postgresql": _check_postgres_full_text, "sqlite": _check_sqlite_fts5}
    assert connection.vendor in checks, f"no knowledge search for {connection.vendor}"
    checks[connection.vendor](settings)


def _check_postgres_full_text(settings) -> None:
    with CaptureQueriesContext(connection) as queries:
        hits = knowledge_search(collection="default", query="refunds", limit=1)
    assert [hit.title for hit in hits] == ["Returns policy"]
    sql = " ".join(query["sql"] for query in queries.captured_queries)
    assert "websearch_to_tsquery" in sql
    assert "ts_rank" in sql
    assert FTS_TABLE not in connection.introspection.table_names()
    # The text search configuration is PostgreSQL's: without English stemming, "refunds"
    # no longer finds "refund".
    settings.KNOWLEDGE_SEARCH_LANGUAGE = "simple"
    assert knowledge_search(collection="default", query="refunds", limit=1) == []
    assert knowledge_search(collection="default", query="refund", limit=1)[0].title == (
        "Returns policy"
    )


def _check_sqlite_fts5(settings) -> None:
    # The FTS5 table is built lazily from the chunks already stored (a database migrated
    # before it existed, or one restored without it).
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {FTS_TABLE}")
    assert FTS_TABLE not in connection.introspection.table_names()
    with CaptureQueriesContext(connection) as queries:
        hits = knowledge_search(collection="default", query="limescale", limit=1)
    assert hits[0].title == "Kettle warranty"
    assert FTS_TABLE in connection.introspection.table_names()
    sql = " ".join(query["sql"] for query in queries.captured_queries)
    assert f'"{FTS_TABLE}" MATCH' in sql
    assert "bm25" in sql


def test_unreadable_files_are_clear_errors(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    image = KnowledgeDocument.objects.create(
        title="Logo", source_file=SimpleUploadedFile("logo.png", b"\x89PNG")
    )
    with pytest.raises(KnowledgeIngestError, match=r"only \.txt, \.md and \.pdf"):
        knowledge_document_ingest(document=image)
    broken = KnowledgeDocument.objects.create(
        title="Broken", source_file=SimpleUploadedFile("broken.pdf", b"%PDF-1.4 garbage")
    )
    with pytest.raises(KnowledgeIngestError, match="PDF"):
        knowledge_document_ingest(document=broken)
    assert KnowledgeChunk.objects.filter(document__in=[image, broken]).count() == 0


def test_chunks_keep_paragraphs_whole_and_overlap():
    paragraphs = [
        f"Paragraph {n} starts. " + f"Fact {n} is stated here. " * 8 + f"End of {n}."
        for n in range(10)
    ]
    chunks = chunk_text("\n\n".join(paragraphs), max_chars=600, overlap_chars=120)
    assert len(chunks) > 1
    assert all(len(chunk) <= 600 for chunk in chunks)
    for paragraph in paragraphs:
        assert any(paragraph in chunk for chunk in chunks)
    for previous, following in itertools.pairwise(chunks):
        # The next chunk starts with the last sentences of the previous one.
        overlap = following.split("\n\n")[0]
        assert 0 < len(overlap) <= 120
        assert previous.endswith(overlap)


def test_a_long_paragraph_is_cut_at_sentences_then_spaces():
    sentences = " ".join(f"Sentence number {n} is here." for n in range(100))
    chunks = chunk_text(sentences, max_chars=300, overlap_chars=0)
    assert all(len(chunk) <= 300 for chunk in chunks)
    assert all(chunk.endswith(".") for chunk in chunks)
    one_long_word_run = "x" * 1000
    assert [len(c) for c in chunk_text(one_long_word_run, max_chars=300)] == [300, 300, 300, 100]


def test_collection_must_be_a_slug():
    from agents.tools.registry import validate_tool_config

    assert validate_tool_config("knowledge_search", {"collection": "staff-notes"}) == {}
    assert validate_tool_config("knowledge_search", {"collection": "staff notes"}) == {
        "collection": "use the collection's slug: letters, digits, - and _"
    }
