"""The tree costs no query per branch: the chat page, the conversation list (with search)
and a switch stay flat as versions and history grow (see test_query_counts.py)."""

from __future__ import annotations

import pytest

from agents.models import AgentRun, Conversation, Message, RunEvent
from agents.services.branches import branch_activate
from agents.services.conversations import conversation_create
from tests.perf.test_query_counts import API_QUERIES, PAGE_QUERIES, count_queries, flat

pytestmark = pytest.mark.django_db


def add_versions(conversation: Conversation, turns: int, *, versions: int = 3) -> None:
    """``turns`` more turns on the active branch, each question with ``versions`` answers
    (regenerated) and ``versions - 1`` edited siblings answered once: a bushy tree, with
    each run's stored frames."""
    conversation.refresh_from_db()
    leaf_id = conversation.active_leaf_id
    seq = conversation.last_seq
    events = []

    def answered(question: Message, count: int) -> list[Message]:
        nonlocal seq
        runs = AgentRun.objects.bulk_create(
            AgentRun(
                conversation=conversation,
                trigger_message=question,
                status=AgentRun.Status.SUCCEEDED,
            )
            for _ in range(count)
        )
        answers = Message.objects.bulk_create(
            Message(
                conversation=conversation,
                role=Message.Role.ASSISTANT,
                content=f"answer {run.pk} with history words",
                parent=question,
                run=run,
            )
            for run in runs
        )
        for run, answer in zip(runs, answers, strict=True):
            for kind in ("step", "run.finished"):
                seq += 1
                payload = {"kind": "thought", "text": "thinking"}
                if kind == "run.finished":
                    payload = {"message": {"id": answer.pk, "parent_id": question.pk}}
                events.append(
                    RunEvent(
                        conversation=conversation, run=run, seq=seq, type=kind, payload=payload
                    )
                )
        return answers

    for turn in range(turns):
        questions = [
            Message.objects.create(
                conversation=conversation,
                role=Message.Role.USER,
                content=f"question {turn} version {version} history",
                parent_id=leaf_id,
            )
            for version in range(versions - 1)
        ]
        for edited in questions[:-1]:
            answered(edited, 1)
        leaf_id = answered(questions[-1], versions)[-1].pk
    RunEvent.objects.bulk_create(events)
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=seq)
    conversation.refresh_from_db()
    branch_activate(conversation=conversation, leaf_id=leaf_id)


def test_chat_page_stays_flat_as_branches_grow(client, user, django_assert_max_num_queries):
    conversation = conversation_create(owner=user)
    add_versions(conversation, 2)
    client.force_login(user)
    url = f"/c/{conversation.pk}/"

    def load() -> None:
        response = client.get(url)
        assert response.status_code == 200
        # The whole tree came with the page, ending where the active branch ends.
        conversation.refresh_from_db()
        nodes = Message.objects.filter(conversation=conversation).count()
        tree = response.context["state"]["tree"]
        assert len(tree["messages"]) == nodes
        assert tree["active_leaf_id"] == conversation.active_leaf_id

    small = count_queries(load)
    add_versions(conversation, 60, versions=4)
    flat(small, load, django_assert_max_num_queries, PAGE_QUERIES)


def test_conversation_list_and_search_stay_flat_as_branches_grow(
    client, user, django_assert_max_num_queries
):
    conversations = [conversation_create(owner=user, title=f"chat {n}") for n in range(3)]
    for conversation in conversations:
        add_versions(conversation, 1)
    client.force_login(user)

    def list_() -> None:
        assert client.get("/api/conversations/").json()["results"]
        assert client.get("/api/conversations/?q=history").json()["results"]

    small = count_queries(list_)
    for conversation in conversations:
        add_versions(conversation, 25, versions=4)
    for n in range(20):
        add_versions(conversation_create(owner=user, title=f"more {n}"), 3)
    flat(small, list_, django_assert_max_num_queries, 2 * API_QUERIES)


def test_a_switch_stays_flat_as_the_tree_grows(client, user, django_assert_max_num_queries):
    conversation = conversation_create(owner=user)
    add_versions(conversation, 2)
    client.force_login(user)
    first = Message.objects.filter(conversation=conversation).order_by("id").first()
    url = f"/api/conversations/{conversation.pk}/branch/"

    def switch() -> None:
        # To the first question: every message of the branch shown before leaves it.
        response = client.post(url, {"message_id": first.pk}, content_type="application/json")
        assert response.status_code == 200

    small = count_queries(switch)
    add_versions(conversation, 80, versions=4)
    flat(small, switch, django_assert_max_num_queries, 2 * API_QUERIES)
