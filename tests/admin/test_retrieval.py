"""The admin's retrieval test page: a query's passages, each with its rank and score in the
full-text search and the search by meaning and its fused place; and a plain message when
search by meaning is off, with the full-text results still shown."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from agents import embeddings
from agents.models import KnowledgeDocument
from agents.services.attachments import attachment_extract, attachment_upload
from agents.services.conversations import conversation_create
from agents.services.knowledge import knowledge_document_ingest
from tests.attachments import samples
from tests.attachments.storage import stored_before  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

URL = reverse("admin:agents_knowledgedocument_retrieval")


def _rows(html: str) -> list[tuple[str, str, str, str]]:
    """(fused rank, full-text rank, meaning rank, where) per result row."""
    body = html.split('id="retrieval-results"', 1)[1]
    return re.findall(
        r'fused-rank">(\d+)<.*?full-text-rank">([^<]+)<.*?meaning-rank">([^<]+)<.*?'
        r'class="where">([^<]+)<',
        body,
        re.S,
    )


def _library() -> None:
    for title, text in [
        ("Remote work", "Employees may work from home up to two days each week."),
        ("Expenses", "Expense reports must be submitted within thirty days of the purchase."),
        ("Badges", "A lost badge should be reported to the security desk at once."),
    ]:
        document = KnowledgeDocument.objects.create(title=title, collection="hr", text=text)
        knowledge_document_ingest(document=document)


def test_the_page_shows_each_search_and_the_fused_rank(staff_client, settings):
    settings.CHAT_EMBEDDINGS = "packaged"
    _library()
    listing = staff_client.get(reverse("admin:agents_knowledgedocument_changelist"))
    assert URL in listing.content.decode()

    page = staff_client.get(URL, {"query": "Can staff telecommute?", "collection": "hr"})
    html = page.content.decode()
    assert embeddings.PACKAGED_MODEL in html
    rows = _rows(html)
    assert [row[0] for row in rows] == ["1", "2", "3"]
    # No word of the query is in any passage: found by meaning alone, the right one first.
    assert rows[0] == ("1", "—", "1", "[Remote work §1]")
    assert {row[1] for row in rows} == {"—"}

    worded = _rows(staff_client.get(URL, {"query": "badge", "collection": "hr"}).content.decode())
    assert worded[0] == ("1", "1", "1", "[Badges §1]")


@pytest.mark.usefixtures("stored_before")
def test_the_page_searches_a_conversations_files(staff_client, staff, settings):
    settings.CHAT_EMBEDDINGS = "packaged"
    conversation = conversation_create(owner=staff)
    attachment = attachment_upload(
        user=staff,
        conversation=conversation,
        name="rules.pdf",
        data=samples.pdf(["Lunch is served at noon.", "Visitors sign in at reception."]),
    )
    attachment_extract(attachment_id=attachment.pk)
    html = staff_client.get(
        URL, {"query": "访客需要登记吗？", "collection": "hr", "conversation": conversation.pk}
    ).content.decode()
    assert _rows(html)[0][3] == "[rules.pdf p.2]"


def test_with_embeddings_off_the_page_says_so_and_full_text_still_works(staff_client, settings):
    settings.CHAT_EMBEDDINGS = "off"
    _library()
    html = staff_client.get(URL, {"query": "expense reports", "collection": "hr"}).content.decode()
    assert "Search by meaning is off (CHAT_EMBEDDINGS=off)" in html
    assert _rows(html) == [("1", "1", "—", "[Expenses §1]")]


def test_the_page_refuses_a_bad_query_plainly(staff_client):
    html = staff_client.get(URL, {"query": "", "collection": "not a slug"}).content.decode()
    assert "This field is required." in html
    assert 'id="retrieval-results"' not in html


def test_the_page_is_staff_only(client, user):
    client.force_login(user)
    response = client.get(URL, {"query": "x", "collection": "hr"})
    assert response.status_code == 302
    assert "/login/" in response["Location"]
