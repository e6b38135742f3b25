"""Reads of attached files, each scoped to what the caller may see: the owner's own files,
a shared conversation's files for its readers, a run's conversation for its tools.

``attachment_search`` is the one way passages are found: (query, conversation) to ranked
passages. It is full-text search (PostgreSQL's ``tsvector``, as the knowledge base uses; on
other databases every word is looked for as a substring) fused by reciprocal rank with a
search by meaning over the passages' vectors when embeddings are on (``agents/embeddings.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet

from agents import embeddings
from agents.db import statements
from agents.models import Attachment, AttachmentChunk, Conversation
from agents.text_search import ranked_matches, search_language

MAX_QUERY_TERMS = 24
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class AttachmentHit:
    attachment_id: int
    name: str
    label: str  # "p.3", "rows 2-40", "" for running text
    page: int | None
    row: int | None
    text: str
    score: float

    @property
    def citation(self) -> str:
        """How an answer cites it: ``[report.pdf p.3]``."""
        return f"[{self.name} {self.label}]" if self.label else f"[{self.name}]"


def attachment_get(*, user: Any, attachment_id: int) -> Attachment | None:
    """The user's own file; another user's is None, like a missing one."""
    if not getattr(user, "is_authenticated", False):
        return None
    return Attachment.objects.filter(pk=attachment_id, owner=user).first()


def attachment_list(*, conversation: Conversation) -> QuerySet[Attachment]:
    return Attachment.objects.filter(conversation=conversation).order_by("id")


def shared_attachment_get(*, conversation: Conversation, attachment_id: int) -> Attachment | None:
    """A file of a conversation its owner shared (the caller resolved the share's token)."""
    return Attachment.objects.filter(pk=attachment_id, conversation=conversation).first()


def attachments_since_last_question(*, conversation: Conversation) -> int:
    """Files attached after the conversation's newest user message: the next message's."""
    newest = (
        conversation.messages.filter(role="user")
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    files = Attachment.objects.filter(conversation=conversation)
    if newest is not None:
        files = files.filter(created_at__gt=newest)
    return files.count()


def _ready(conversation_id: int) -> QuerySet[Attachment]:
    """The conversation's files whose text was read: the ones a run is given."""
    return Attachment.objects.filter(conversation_id=conversation_id, state=Attachment.State.READY)


def attachments_ready(*, conversation_id: int) -> list[Attachment]:
    return list(_ready(conversation_id).order_by("id"))


def attachments_any_ready(*, conversation_id: int) -> bool:
    return _ready(conversation_id).exists()


def attachment_by_name(*, conversation_id: int, name: str) -> Attachment | None:
    files = _ready(conversation_id)
    return files.filter(name=name).order_by("-id").first() or (
        files.filter(name__iexact=name.strip()).order_by("-id").first()
    )


def attachment_passages(*, attachment: Attachment) -> QuerySet[AttachmentChunk]:
    return attachment.chunks.order_by("position")


def attachment_passage_at_row(*, attachment: Attachment, row: int) -> AttachmentChunk | None:
    """The passage of a table that holds ``row``: the last one starting at or before it."""
    return attachment.chunks.filter(row__lte=row).order_by("-row").first()


def attachment_full_text(*, attachment: Attachment) -> str:
    """The file's passages in order, each headed by its location."""
    parts = []
    for chunk in attachment_passages(attachment=attachment):
        parts.append(f"[{chunk.label}]\n{chunk.text}" if chunk.label else chunk.text)
    return "\n\n".join(parts)


def attachment_search(*, conversation_id: int, query: str, limit: int = 5) -> list[AttachmentHit]:
    """The passages of the conversation's ready files that best match ``query``, best first
    (``attachment_search_ranked``)."""
    return [
        hit
        for hit, _ in attachment_search_ranked(
            conversation_id=conversation_id, query=query, limit=limit
        )
    ]


def attachment_search_ranked(
    *, conversation_id: int, query: str, limit: int = 5
) -> list[tuple[AttachmentHit, embeddings.Ranked]]:
    """The best passages with where each stood in the two searches and in their fusion.

    Full text: every word must match first; when nothing does, any word may. Where the
    database's full-text search finds nothing (words it does not split, such as Chinese),
    each word is looked for as a substring. By meaning: the passages whose vectors are
    nearest the query's. A hit's ``score`` is its fused one."""
    terms = _WORD.findall(query.lower())[:MAX_QUERY_TERMS]
    if not terms or limit < 1:
        return []
    chunks = AttachmentChunk.objects.filter(
        attachment__conversation_id=conversation_id,
        attachment__state=Attachment.State.READY,
    )
    depth = max(limit * 4, embeddings.SEARCH_DEPTH)
    found: list[tuple[int, AttachmentHit]] = []
    if statements.full_text_search() == "tsvector":
        found = _postgres_search(chunks, query, terms, depth)
    if not found:
        found = _substring_search(chunks, terms, depth)

    def load(ids: list[int]) -> dict[int, AttachmentHit]:
        loaded = {}
        for row in chunks.filter(id__in=ids).values_list("id", *_FIELDS):
            chunk_id, attachment_id, name, label, page, row_number, text = row
            loaded[chunk_id] = AttachmentHit(
                attachment_id, name, label, page, row_number, text, 0.0
            )
        return loaded

    return embeddings.fused_hits(found, chunks, query, depth=depth, limit=limit, load=load)


_FIELDS = ("attachment_id", "attachment__name", "label", "page", "row", "text")


def _postgres_search(
    chunks: QuerySet[AttachmentChunk], query: str, terms: list[str], limit: int
) -> list[tuple[int, AttachmentHit]]:
    from django.contrib.postgres.search import SearchVector

    rows = ranked_matches(
        chunks,
        vector=SearchVector("text", config=search_language()),
        query=query,
        terms=terms,
        order_by=("attachment_id", "position"),
        fields=("id", *_FIELDS),
        limit=limit,
    )
    return [(row[0], AttachmentHit(*row[1:])) for row in rows]


def _substring_search(
    chunks: QuerySet[AttachmentChunk], terms: list[str], limit: int
) -> list[tuple[int, AttachmentHit]]:
    any_term = Q()
    for term in terms:
        any_term |= Q(text__icontains=term)
    # Bounded: the conversation's passages that hold at least one word, scored here.
    rows = list(
        chunks.filter(any_term)
        .order_by("attachment_id", "position")
        .values_list("id", *_FIELDS)[:2000]
    )
    scored = []
    for row in rows:
        lowered = row[-1].lower()
        score = sum(1 for term in terms if term in lowered) / len(terms)
        chunk_id, attachment_id, name, label, page, row_number, text = row
        scored.append(
            (chunk_id, AttachmentHit(attachment_id, name, label, page, row_number, text, score))
        )
    scored.sort(key=lambda pair: -pair[1].score)
    return scored[:limit]


def conversation_sandbox_files(conversation_id: int) -> list[tuple[str, str | bytes]]:
    """The conversation's stored files as (name, bytes), for the sandboxed python tool to
    lay out read-only in ``/data``. Files that failed to read are still the user's files:
    all are given. Two files of one name (a report attached twice) get ``report (2).pdf``
    for the later one, as a folder holds one of each name."""
    files: list[tuple[str, str | bytes]] = []
    taken: set[str] = set()
    for attachment in Attachment.objects.filter(conversation_id=conversation_id).order_by("id"):
        with attachment.file.open("rb") as stored:
            files.append((_unique_name(attachment.name, taken), stored.read()))
    return files


def _unique_name(name: str, taken: set[str]) -> str:
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{stem} ({number}){dot}{extension}"
    taken.add(candidate)
    return candidate


@dataclass(frozen=True)
class FilesForRun:
    """What a run is given of the conversation's files: the small ones whole (``inline``, put
    before the question), and whether the attachment tools are offered for the rest."""

    inline: str
    searchable: bool


# What a run whose conversation has no file to give it is given.
NO_FILES = FilesForRun("", False)


def attachments_for_run(*, conversation_id: int, token_budget: int) -> FilesForRun:
    """Files whose whole text fits go into the prompt, oldest first, while ``token_budget``
    lasts; every file that was read can also be searched and read with the tools."""
    files = attachments_ready(conversation_id=conversation_id)
    if not files:
        return NO_FILES
    left = min(token_budget, settings.CHAT_ATTACHMENT_INLINE_TOKENS)
    whole: list[str] = []
    searched: list[str] = []
    for attachment in files:
        if attachment.text_tokens <= left:
            left -= attachment.text_tokens
            text = attachment_full_text(attachment=attachment)
            whole.append(f'<file name="{attachment.name}">\n{text}\n</file>')
        else:
            searched.append(attachment.name)
    parts = [
        "The user attached files to this conversation. Cite what you use from them with the "
        "label of its passage, like [report.pdf p.3] or [data.csv rows 2-40]."
    ]
    parts.extend(whole)
    if searched:
        parts.append(
            "Too long to show here, to be searched with search_attachments and read with "
            "read_attachment: " + ", ".join(searched)
        )
    return FilesForRun("\n\n".join(parts), True)
