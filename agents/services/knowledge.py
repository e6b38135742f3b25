"""The knowledge base behind the ``knowledge_search`` tool: ingest documents, search passages.

Ingesting extracts a document's text (plain text, Markdown or PDF), cuts it into chunks at
paragraph boundaries with a little overlap, and indexes them. Search is PostgreSQL full-text
search in production and SQLite FTS5 when embedded (``statements.full_text_search``), fused
by reciprocal rank with a search by meaning when embeddings are on (``agents/embeddings.py``;
each chunk's vector is computed here as it is indexed). The
FTS5 table is created lazily here, not by a migration, so it also exists in test databases
built without migrations; a chunk that is gone from ``KnowledgeChunk`` is ignored by the
join even if its FTS row lingers. Its statements are in ``agents/db/statements.py``.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import PurePath

from django.db import connection, transaction

from agents import embeddings
from agents.db import statements
from agents.models import KnowledgeChunk, KnowledgeDocument
from agents.text_search import ranked_matches, search_language

CHUNK_MAX_CHARS = 1200
CHUNK_OVERLAP_CHARS = 200
MAX_QUERY_TERMS = 24
TEXT_SUFFIXES = {".txt", ".text", ".md", ".markdown", ".rst", ""}
FTS_TABLE = statements.FTS5_TABLE

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


class KnowledgeIngestError(ValueError):
    """The document's file cannot be read as text; the message says why."""


@dataclass(frozen=True)
class KnowledgeHit:
    document_id: int
    title: str
    position: int  # 1-based, as cited: [Title §position]
    text: str
    score: float


# --------------------------------------------------------------------------------------
# Ingest
# --------------------------------------------------------------------------------------


@transaction.atomic
def knowledge_document_ingest(*, document: KnowledgeDocument) -> int:
    """(Re)build the document's chunks and index; returns the number of chunks.

    With a file attached, the file is the source of truth and ``text`` is refilled from it;
    otherwise ``text`` as typed in the admin is indexed.
    """
    if document.source_file:
        document.source_file.open("rb")
        try:
            data = document.source_file.read()
        finally:
            document.source_file.close()
        document.text = extract_text(name=document.source_file.name or "", data=data)
        KnowledgeDocument.objects.filter(pk=document.pk).update(text=document.text)
    old_ids = list(document.chunks.values_list("id", flat=True))
    document.chunks.all().delete()
    texts = chunk_text(document.text)
    embedded = embeddings.embed_passages(texts)
    model, vectors = embedded if embedded else ("", [None] * len(texts))
    chunks = KnowledgeChunk.objects.bulk_create(
        KnowledgeChunk(
            document=document,
            position=number,
            text=text,
            embedding=vector,
            embedding_model=model,
        )
        for number, (text, vector) in enumerate(zip(texts, vectors, strict=True), start=1)
    )
    if statements.full_text_search() == "fts5":
        _fts_replace(old_ids=old_ids, document=document, chunks=chunks)
    return len(chunks)


@transaction.atomic
def knowledge_document_delete(*, document: KnowledgeDocument) -> None:
    old_ids = list(document.chunks.values_list("id", flat=True))
    document.delete()
    if statements.full_text_search() == "fts5":
        _fts_replace(old_ids=old_ids, document=None, chunks=[])


def extract_text(*, name: str, data: bytes) -> str:
    """The text of an uploaded file, chosen by its extension."""
    suffix = PurePath(name).suffix.lower()
    if suffix == ".pdf":
        return _pdf_text(data)
    if suffix not in TEXT_SUFFIXES:
        raise KnowledgeIngestError(
            f"{PurePath(name).name}: only .txt, .md and .pdf files can be indexed"
        )
    if b"\x00" in data[:4096]:
        raise KnowledgeIngestError(f"{PurePath(name).name} looks binary, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _pdf_text(data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError) as exc:
        raise KnowledgeIngestError(f"the PDF could not be read: {exc}") from None
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    if not text:
        raise KnowledgeIngestError("the PDF has no extractable text (is it a scanned image?)")
    return text


def chunk_text(
    text: str, *, max_chars: int = CHUNK_MAX_CHARS, overlap_chars: int = CHUNK_OVERLAP_CHARS
) -> list[str]:
    """Paragraph-aware chunks of at most ``max_chars``.

    Paragraphs are kept whole when they fit; a longer one is cut at sentence ends, and a
    sentence longer than a chunk at spaces. Each chunk after the first starts with the end
    of the previous one (up to ``overlap_chars``, whole sentences) so a fact that straddles
    a boundary is still found with its context.
    """
    pieces: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        paragraph = paragraph.strip()
        if paragraph:
            pieces.extend(_fit(paragraph, max_chars))
    chunks: list[str] = []
    current: list[str] = []
    for piece in pieces:
        candidate = "\n\n".join([*current, piece])
        if current and len(candidate) > max_chars:
            chunks.append("\n\n".join(current))
            overlap = _tail(current[-1], overlap_chars)
            current = [overlap] if overlap and len(overlap) + 2 + len(piece) <= max_chars else []
        current.append(piece)
    if current:
        chunks.append("\n\n".join(current))
    return chunks


def _fit(paragraph: str, max_chars: int) -> list[str]:
    if len(paragraph) <= max_chars:
        return [paragraph]
    parts: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(paragraph):
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", 0, max_chars)
            cut = cut if cut > max_chars // 2 else max_chars
            head, sentence = sentence[:cut].rstrip(), sentence[cut:].lstrip()
            if current:
                parts.append(current)
                current = ""
            parts.append(head)
        if current and len(current) + 1 + len(sentence) > max_chars:
            parts.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        parts.append(current)
    return parts


def _tail(text: str, limit: int) -> str:
    """The last whole sentences of ``text`` that fit in ``limit`` characters."""
    tail = ""
    for sentence in reversed(_SENTENCE_END.split(text)):
        candidate = f"{sentence} {tail}".strip()
        if len(candidate) > limit:
            break
        tail = candidate
    return tail


# --------------------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------------------


def knowledge_search(*, collection: str, query: str, limit: int = 4) -> list[KnowledgeHit]:
    """The best passages of ``collection`` for ``query``, best first: full-text search fused
    with search by meaning (``knowledge_search_ranked``)."""
    return [
        hit for hit, _ in knowledge_search_ranked(collection=collection, query=query, limit=limit)
    ]


def knowledge_search_ranked(
    *, collection: str, query: str, limit: int = 4
) -> list[tuple[KnowledgeHit, embeddings.Ranked]]:
    """The best passages with where each stood in the two searches and in their fusion.

    Full text: all words must match first (web-search syntax on PostgreSQL: quotes, ``or``,
    ``-word``); when nothing does, any word may, ranked by how well it matches. By meaning:
    the passages whose vectors are nearest the query's. A hit's ``score`` is its fused one.
    """
    terms = _WORD.findall(query.lower())[:MAX_QUERY_TERMS]
    if not terms or limit < 1:
        return []
    depth = max(limit * 4, embeddings.SEARCH_DEPTH)
    kind = statements.full_text_search()
    if kind == "tsvector":
        found = _postgres_search(collection, query, terms, depth)
    elif kind == "fts5":
        found = _sqlite_search(collection, terms, depth)
    else:
        raise NotImplementedError(
            f"knowledge search supports PostgreSQL and SQLite, not {connection.display_name}"
        )

    def load(ids: list[int]) -> dict[int, KnowledgeHit]:
        rows = KnowledgeChunk.objects.filter(id__in=ids).values_list(
            "id", "document_id", "document__title", "position", "text"
        )
        return {row[0]: KnowledgeHit(*row[1:], score=0.0) for row in rows}

    chunks = KnowledgeChunk.objects.filter(document__collection=collection)
    return embeddings.fused_hits(found, chunks, query, depth=depth, limit=limit, load=load)


def _postgres_search(
    collection: str, query: str, terms: list[str], limit: int
) -> list[tuple[int, KnowledgeHit]]:
    from django.contrib.postgres.search import SearchVector

    language = search_language()
    rows = ranked_matches(
        KnowledgeChunk.objects.filter(document__collection=collection),
        vector=SearchVector("document__title", weight="A", config=language)
        + SearchVector("text", weight="B", config=language),
        query=query,
        terms=terms,
        order_by=("document_id", "position"),
        fields=("id", "document_id", "document__title", "position", "text"),
        limit=limit,
    )
    return [(row[0], KnowledgeHit(*row[1:])) for row in rows]


def _sqlite_search(collection: str, terms: list[str], limit: int) -> list[tuple[int, KnowledgeHit]]:
    _fts_ensure()
    quoted = ['"' + term.replace('"', '""') + '"' for term in terms]
    with connection.cursor() as cursor:
        for match in (" ".join(quoted), " OR ".join(quoted)):
            cursor.execute(statements.fts5_search(), [match, collection, limit])
            rows = cursor.fetchall()
            if rows:
                return [(row[0], KnowledgeHit(*row[1:])) for row in rows]
    return []


# --------------------------------------------------------------------------------------
# SQLite FTS5 index, kept beside KnowledgeChunk (rowid = chunk id)
# --------------------------------------------------------------------------------------


def _fts_ensure() -> None:
    with connection.cursor() as cursor:
        cursor.execute(statements.fts5_table_exists())
        if cursor.fetchone():
            return
        cursor.execute(statements.fts5_table_create())
        # Chunks written before the table existed (or while it was missing) are indexed now.
        cursor.execute(statements.fts5_index_every_chunk())


def _fts_replace(
    *, old_ids: list[int], document: KnowledgeDocument | None, chunks: list[KnowledgeChunk]
) -> None:
    _fts_ensure()
    # The new chunks may already be there if _fts_ensure just built the table from them.
    stale = [*old_ids, *(chunk.id for chunk in chunks)]
    with connection.cursor() as cursor:
        if stale:
            cursor.executemany(statements.fts5_delete_chunk(), [[chunk_id] for chunk_id in stale])
        if document is not None and chunks:
            cursor.executemany(
                statements.fts5_index_chunk(),
                [[chunk.id, document.title, chunk.text] for chunk in chunks],
            )
        # Rows of chunks deleted without this service (a cascade from the admin) go too.
        cursor.execute(statements.fts5_delete_orphans())
