"""The conversation as a tree: regenerate and edit keep earlier versions as siblings, one
branch is active, switching is the owner's alone, and bad input changes nothing."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from agents import selectors
from agents.models import AgentRun, Conversation, Message
from agents.protocol import RequestRefused
from agents.react.types import FinalAnswerStep
from agents.runs.store import run_fail, run_finish
from agents.services.branches import branch_switch
from agents.services.conversations import (
    conversation_create,
    message_edit_resend,
    message_send,
    run_regenerate,
)

pytestmark = pytest.mark.django_db


def finish(run: AgentRun, text: str) -> Message:
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.RUNNING)
    run.refresh_from_db()
    answer = run_finish(run=run, step=FinalAnswerStep(text=text))
    assert answer is not None
    return answer


def turn(conversation: Conversation, user, question: str, answer: str) -> tuple[Message, Message]:
    sent = message_send(conversation=conversation, user=user, content=question)
    return sent.message, finish(sent.run, answer)


def leaf(conversation: Conversation) -> int | None:
    conversation.refresh_from_db()
    return conversation.active_leaf_id


def shown(conversation: Conversation) -> list[str]:
    return [m.content for m in selectors.message_list(conversation=conversation)]


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_a_send_continues_the_branch_and_its_answer_ends_it(conversation, user):
    q1, a1 = turn(conversation, user, "q1", "a1")
    q2, a2 = turn(conversation, user, "q2", "a2")

    assert (q1.parent_id, a1.parent_id, q2.parent_id, a2.parent_id) == (None, q1.pk, a1.pk, q2.pk)
    assert leaf(conversation) == a2.pk
    assert shown(conversation) == ["q1", "a1", "q2", "a2"]
    assert selectors.branch_ids(conversation=conversation, leaf_id=a2.pk) == [
        q1.pk,
        a1.pk,
        q2.pk,
        a2.pk,
    ]


def test_regenerate_keeps_every_earlier_answer_as_a_sibling(conversation, user):
    question, first = turn(conversation, user, "a colour?", "red")

    run = run_regenerate(conversation=conversation, user=user)
    # Until the new answer comes, the branch ends at the question.
    assert run.trigger_message_id == question.pk
    assert leaf(conversation) == question.pk
    assert shown(conversation) == ["a colour?"]
    second = finish(run, "blue")
    third = finish(run_regenerate(conversation=conversation, user=user), "green")

    assert [first.parent_id, second.parent_id, third.parent_id] == [question.pk] * 3
    assert list(question.children.order_by("id")) == [first, second, third]
    assert leaf(conversation) == third.pk
    assert shown(conversation) == ["a colour?", "green"]
    assert Message.objects.filter(conversation=conversation).count() == 4


def test_regenerate_answers_the_last_question_of_the_active_branch(conversation, user):
    _q1, a1 = turn(conversation, user, "q1", "a1")
    turn(conversation, user, "q2", "a2")
    branch_switch(conversation=conversation, user=user, message_id=a1.pk)
    # The branch through a1 still goes on with q2: regenerating answers q2 again.
    run = run_regenerate(conversation=conversation, user=user)
    assert run.trigger_message.content == "q2"


def test_edit_makes_a_sibling_and_leaves_the_original_branch_whole(conversation, user):
    _q1, a1 = turn(conversation, user, "q1", "a1")
    q2, _a2 = turn(conversation, user, "q2", "a2")
    turn(conversation, user, "q3", "a3")

    edited = message_edit_resend(message=q2, user=user, content="q2, better")
    assert edited.message.parent_id == a1.pk  # a sibling of q2
    assert leaf(conversation) == edited.message.pk
    assert shown(conversation) == ["q1", "a1", "q2, better"]
    answer = finish(edited.run, "b2")
    assert shown(conversation) == ["q1", "a1", "q2, better", "b2"]

    # Switching back to q2 shows its whole continuation, newest below it.
    switched = branch_switch(conversation=conversation, user=user, message_id=q2.pk)
    assert shown(conversation) == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert switched.leaf_id == leaf(conversation)
    assert switched.branch == [m.pk for m in selectors.message_list(conversation=conversation)]
    branch_switch(conversation=conversation, user=user, message_id=edited.message.pk)
    assert leaf(conversation) == answer.pk


def test_editing_the_first_question_makes_another_first_message(conversation, user):
    q1, _ = turn(conversation, user, "q1", "a1")
    edited = message_edit_resend(message=q1, user=user, content="q1, better")
    assert edited.message.parent_id is None
    assert shown(conversation) == ["q1, better"]


def test_the_next_message_continues_the_branch_switched_to(conversation, user):
    _question, first = turn(conversation, user, "a colour?", "red")
    finish(run_regenerate(conversation=conversation, user=user), "blue")
    branch_switch(conversation=conversation, user=user, message_id=first.pk)

    sent = message_send(conversation=conversation, user=user, content="why?")
    assert sent.message.parent_id == first.pk
    assert shown(conversation) == ["a colour?", "red", "why?"]


def test_a_send_may_name_the_message_it_follows(conversation, user):
    """The page names the end of the branch it shows, so a switch still on its way cannot
    send the question down another branch."""
    _question, first = turn(conversation, user, "a colour?", "red")
    second = finish(run_regenerate(conversation=conversation, user=user), "blue")
    assert leaf(conversation) == second.pk

    sent = message_send(conversation=conversation, user=user, content="why?", parent_id=first.pk)
    assert sent.message.parent_id == first.pk
    assert shown(conversation) == ["a colour?", "red", "why?"]
    assert not Message.objects.get(pk=second.pk).on_active_branch


def test_an_answer_does_not_take_over_after_a_switch_away(conversation, user):
    question, first = turn(conversation, user, "a colour?", "red")
    run = run_regenerate(conversation=conversation, user=user)
    branch_switch(conversation=conversation, user=user, message_id=first.pk)

    late = finish(run, "blue")

    assert leaf(conversation) == first.pk
    assert shown(conversation) == ["a colour?", "red"]
    assert late.parent_id == question.pk
    assert not Message.objects.get(pk=late.pk).on_active_branch


def test_switching_is_for_the_owner_only(conversation, user, other_user):
    _, first = turn(conversation, user, "q", "a")
    finish(run_regenerate(conversation=conversation, user=user), "b")
    before = leaf(conversation)

    with pytest.raises(RequestRefused) as refused:
        branch_switch(conversation=conversation, user=other_user, message_id=first.pk)
    assert refused.value.code == "not_found"
    assert leaf(conversation) == before


@pytest.mark.parametrize("where", ["another conversation", "another user's", "no such message"])
def test_switching_to_a_message_not_in_the_conversation_is_refused(
    conversation, user, other_user, where
):
    _, answer = turn(conversation, user, "q", "a")
    owner = other_user if where == "another user's" else user
    elsewhere = conversation_create(owner=owner)
    _, foreign = turn(elsewhere, owner, "q elsewhere", "a elsewhere")
    target = 999_999_999 if where == "no such message" else foreign.pk
    flags = list(Message.objects.order_by("id").values_list("id", "on_active_branch"))

    with pytest.raises(RequestRefused) as refused:
        branch_switch(conversation=conversation, user=user, message_id=target)

    assert refused.value.code == "not_found"
    assert str(target) in refused.value.message
    assert "not in this conversation" in refused.value.message
    assert leaf(conversation) == answer.pk
    assert list(Message.objects.order_by("id").values_list("id", "on_active_branch")) == flags


def test_a_send_naming_a_message_of_another_conversation_writes_nothing(conversation, user):
    turn(conversation, user, "q", "a")
    elsewhere = conversation_create(owner=user)
    _, foreign = turn(elsewhere, user, "q elsewhere", "a elsewhere")
    counts = (Message.objects.count(), AgentRun.objects.count())

    with pytest.raises(RequestRefused) as refused:
        message_send(conversation=conversation, user=user, content="hi", parent_id=foreign.pk)

    assert refused.value.code == "not_found"
    assert (Message.objects.count(), AgentRun.objects.count()) == counts


def test_the_branch_view_shows_a_failed_attempt_after_its_question(conversation, user):
    question, first = turn(conversation, user, "q", "a")
    run = run_regenerate(conversation=conversation, user=user)
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.RUNNING)
    run.refresh_from_db()
    run_fail(run=run, code="model_error", message="The model is down.")

    view = selectors.active_branch_view(conversation=conversation)
    assert view.message_ids == {question.pk}
    assert view.run_ids == {run.pk}
    branch_switch(conversation=conversation, user=user, message_id=first.pk)
    view = selectors.active_branch_view(conversation=conversation)
    assert view.message_ids == {question.pk, first.pk}
    assert view.run_ids == {first.run_id}


def test_search_finds_only_the_active_branch(conversation, user):
    _, first = turn(conversation, user, "a colour?", "crimson")
    finish(run_regenerate(conversation=conversation, user=user), "azure")

    def found(q: str) -> list[int]:
        return [c.pk for c in selectors.conversation_list(user=user, q=q)]

    assert found("azure") == [conversation.pk]
    assert found("crimson") == []
    branch_switch(conversation=conversation, user=user, message_id=first.pk)
    assert found("crimson") == [conversation.pk]
    assert found("azure") == []


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_existing_conversations_migrate_as_one_branch(user):
    """What the data migration does to a conversation written before the tree: one line,
    in the order written, ending at the newest message."""
    conversation = Conversation.objects.create(owner=user)
    legacy = [
        Message.objects.create(conversation=conversation, role=role, content=text)
        for role, text in [
            ("user", "q1"),
            ("assistant", "a1"),
            ("assistant", "a1 again"),
            ("user", "q2"),
            ("assistant", "a2"),
        ]
    ]
    empty = Conversation.objects.create(owner=user)
    migration = importlib.import_module("agents.migrations.0009_message_tree")

    migration.existing_conversations_as_one_branch(apps, None)

    legacy = [Message.objects.get(pk=m.pk) for m in legacy]
    assert [m.parent_id for m in legacy] == [None, *[m.pk for m in legacy[:-1]]]
    assert all(m.on_active_branch for m in legacy)
    assert leaf(conversation) == legacy[-1].pk
    assert leaf(empty) is None
    assert shown(conversation) == ["q1", "a1", "a1 again", "q2", "a2"]
