"""The sidebar's API: pin and unpin, pinned first, the active-run marker, search snippets."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import AgentRun, Conversation, Message
from agents.services.conversations import (
    conversation_create,
    conversation_pin,
    conversation_set_archived,
    conversation_unpin,
    message_send,
)
from agents.snippets import snippet_segments

# Run on SQLite too (make test-sqlite): the sidebar's reads and search.
pytestmark = [pytest.mark.django_db, pytest.mark.smoke]

LIST = "/api/conversations/"


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def pin_url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/pin/"


def listed_ids(api, **params) -> list[int]:
    return [row["id"] for row in api.get(LIST, params).json()["results"]]


def active_at(conversation: Conversation, when) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=when)


def joined(segments) -> str:
    return "".join(segment["text"] for segment in segments)


# ---- pin ---------------------------------------------------------------------------------


def test_pinned_conversations_come_first_latest_pin_on_top(api, user):
    now = timezone.now()
    oldest = conversation_create(owner=user, title="oldest")
    middle = conversation_create(owner=user, title="middle")
    newest = conversation_create(owner=user, title="newest")
    for offset, conversation in enumerate((newest, middle, oldest)):
        active_at(conversation, now - timedelta(days=offset))
    assert listed_ids(api) == [newest.pk, middle.pk, oldest.pk]

    assert api.post(pin_url(middle)).json()["pinned"] is True
    assert api.post(pin_url(oldest)).json()["pinned"] is True
    assert listed_ids(api) == [oldest.pk, middle.pk, newest.pk]

    body = api.delete(pin_url(oldest)).json()
    assert body["pinned"] is False
    assert body["pinned_at"] is None
    assert listed_ids(api) == [middle.pk, newest.pk, oldest.pk]


def test_pinning_is_not_activity_and_pinning_twice_keeps_the_place(user):
    conversation = conversation_create(owner=user, title="x")
    active_at(conversation, timezone.now() - timedelta(days=3))
    conversation.refresh_from_db()
    before = conversation.updated_at
    conversation_pin(conversation=conversation)
    first_pin = conversation.pinned_at
    conversation_pin(conversation=conversation)
    conversation.refresh_from_db()
    assert conversation.pinned_at == first_pin
    assert conversation.updated_at == before
    conversation_unpin(conversation=conversation)
    conversation_unpin(conversation=conversation)
    conversation.refresh_from_db()
    assert conversation.pinned_at is None
    assert conversation.updated_at == before


def test_archive_and_unarchive_keep_the_last_activity(user):
    conversation = conversation_create(owner=user, title="x")
    active_at(conversation, timezone.now() - timedelta(days=40))
    conversation.refresh_from_db()
    before = conversation.updated_at
    conversation_set_archived(conversation=conversation, archived=True)
    conversation_set_archived(conversation=conversation, archived=False)
    conversation.refresh_from_db()
    assert conversation.updated_at == before


def test_another_users_conversation_cannot_be_pinned_or_unpinned(api, other_user):
    theirs = conversation_create(owner=other_user, title="theirs")
    response = api.post(pin_url(theirs))
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    conversation_pin(conversation=theirs)
    assert api.delete(pin_url(theirs)).status_code == 404
    theirs.refresh_from_db()
    assert theirs.pinned_at is not None
    assert api.post("/api/conversations/999999/pin/").status_code == 404


def test_pin_needs_a_signed_in_user(client, user):
    conversation = conversation_create(owner=user, title="x")
    assert client.post(pin_url(conversation)).status_code in (401, 403)
    conversation.refresh_from_db()
    assert conversation.pinned_at is None


# ---- the active-run marker -----------------------------------------------------------------


def test_the_list_says_which_conversations_have_a_run_going(api, user):
    running = conversation_create(owner=user, title="running")
    idle = conversation_create(owner=user, title="idle")
    result = message_send(conversation=running, user=user, content="hi", client_id="a")
    rows = {row["id"]: row for row in api.get(LIST).json()["results"]}
    assert rows[running.pk]["has_active_run"] is True
    assert rows[idle.pk]["has_active_run"] is False
    # The single-conversation answers say it too.
    assert api.post(pin_url(running)).json()["has_active_run"] is True

    AgentRun.objects.filter(pk=result.run.pk).update(status=AgentRun.Status.SUCCEEDED)
    rows = {row["id"]: row for row in api.get(LIST).json()["results"]}
    assert rows[running.pk]["has_active_run"] is False


# ---- search snippets -------------------------------------------------------------------


def test_search_results_carry_a_snippet_of_the_newest_matching_message(api, user):
    conversation = conversation_create(owner=user, title="Misc")
    Message.objects.create(conversation=conversation, role="user", content="older LISBON note")
    Message.objects.create(
        conversation=conversation, role="assistant", content="Flights to Lisbon leave at nine."
    )
    Message.objects.create(conversation=conversation, role="user", content="unrelated")
    [row] = api.get(LIST, {"q": "lisbon"}).json()["results"]
    assert row["snippet"] == [
        {"text": "Flights to ", "match": False},
        {"text": "Lisbon", "match": True},
        {"text": " leave at nine.", "match": False},
    ]
    # Without a search there is no snippet.
    assert api.get(LIST).json()["results"][0]["snippet"] is None


def test_a_match_deep_in_a_long_answer_is_cut_around_the_match(api, user):
    conversation = conversation_create(owner=user, title="Long")
    text = "filler " * 2000 + "the <b>needle</b> & more " + "tail " * 2000
    Message.objects.create(conversation=conversation, role="assistant", content=text)
    [row] = api.get(LIST, {"q": "NEEDLE"}).json()["results"]
    snippet = row["snippet"]
    assert snippet[0]["text"].startswith("…")
    assert snippet[-1]["text"].endswith("…")
    assert [s["text"] for s in snippet if s["match"]] == ["needle"]
    # The text comes back as text; the page marks it up with DOM nodes, never as HTML.
    assert "the <b>needle</b> & more" in joined(snippet)
    assert len(joined(snippet)) < 250


def test_a_title_only_match_has_no_snippet_and_wildcards_are_literal(api, user):
    by_title = conversation_create(owner=user, title="Lisbon")
    Message.objects.create(conversation=by_title, role="user", content="nothing here")
    percent = conversation_create(owner=user, title="Numbers")
    Message.objects.create(conversation=percent, role="user", content="grew by 100% this year")
    conversation_create(owner=user, title="Other")
    [row] = api.get(LIST, {"q": "lisbon"}).json()["results"]
    assert row["id"] == by_title.pk
    assert row["snippet"] is None
    [row] = api.get(LIST, {"q": "100%"}).json()["results"]
    assert row["id"] == percent.pk
    assert [s["text"] for s in row["snippet"] if s["match"]] == ["100%"]


def test_snippet_segments_mark_every_match_and_keep_the_text():
    segments = snippet_segments("Cats and CATS and\n\ncats", "cats")
    assert joined(segments) == "Cats and CATS and cats"
    assert [s["text"] for s in segments if s["match"]] == ["Cats", "CATS", "cats"]
    assert snippet_segments("no match here", "cats") is None
    assert snippet_segments(None, "cats") is None
    assert snippet_segments("emoji 🐈 cats", "cats")[-1] == {"text": "cats", "match": True}
