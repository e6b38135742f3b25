"""What a run is given of the past, per strategy, and when summarising is enqueued."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from agents.llm.tokens import count_message_tokens
from agents.memory.services import (
    SummaryRequest,
    memory_after_run,
    memory_for_run,
    summary_request,
)
from agents.memory.strategies import SUMMARY_FRAMING_TOKENS
from agents.models import AgentRun, MemorySummary
from tests.memory.conftest import add_turn, append, ask, filler, snapshot_for

NOTHING_TO_FOLD = SummaryRequest.NOTHING_TO_FOLD

pytestmark = pytest.mark.django_db


def contents(context) -> list[str]:
    return [message["content"] for message in context.history]


def test_buffer_gives_the_whole_history_before_the_question(conversation):
    first = add_turn(conversation, "q1", "a1")
    second = add_turn(conversation, "q2", "a2")
    question = ask(conversation, "q3")
    add_turn(conversation, "q4 (after the question: not history)", "a4")

    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot_for("buffer"),
        model_name="",
        before_message=question,
    )

    assert contents(context) == ["q1", "a1", "q2", "a2"]
    assert [m["role"] for m in context.history] == ["user", "assistant"] * 2
    assert context.summary == ""
    assert context.summary_id is None
    assert first[0].pk < second[0].pk


def test_window_gives_the_last_k_turns_whole(conversation):
    for index in range(5):
        add_turn(conversation, f"q{index}", f"a{index}")
    add_turn(conversation, "q5 whose run failed", None)
    question = ask(conversation, "q6")

    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot_for("window", window=2),
        model_name="",
        before_message=question,
    )

    assert contents(context) == ["q4", "a4", "q5 whose run failed"]


def test_summary_buffer_gives_the_newest_summary_and_the_turns_after_its_cut(conversation):
    early = add_turn(conversation, "q1", "a1") + add_turn(conversation, "q2", "a2")
    MemorySummary.objects.create(
        conversation=conversation,
        text="The user asked q1.",
        covers_from=early[0],
        covers_through=early[1],
    )
    newest = MemorySummary.objects.create(
        conversation=conversation,
        text="The user asked q1 and q2.",
        covers_from=early[2],
        covers_through=early[3],
    )
    add_turn(conversation, "q3", "a3")
    question = ask(conversation)

    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot_for(budget=1000),
        model_name="",
        before_message=question,
    )

    assert context.summary == "The user asked q1 and q2."
    assert context.summary_id == newest.pk
    assert contents(context) == ["q3", "a3"]


def test_a_summary_past_the_question_is_not_used(conversation):
    """Regenerating an old answer must not see a summary of what came after it."""
    first = add_turn(conversation, "q1", "a1")
    question = ask(conversation, "q2")
    later = add_turn(conversation, "q3", "a3")
    MemorySummary.objects.create(
        conversation=conversation, text="old", covers_from=first[0], covers_through=first[1]
    )
    MemorySummary.objects.create(
        conversation=conversation, text="too new", covers_from=question, covers_through=later[1]
    )

    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot_for(budget=1000),
        model_name="",
        before_message=question,
    )

    assert context.summary == "old"
    assert contents(context) == []


def test_while_a_summary_is_pending_the_prompt_drops_the_oldest_turns_to_stay_in_budget(
    conversation,
):
    budget = 300
    for _ in range(30):
        add_turn(conversation, filler(20), filler(20))
    question = ask(conversation)

    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot_for(budget=budget),
        model_name="",
        before_message=question,
    )

    assert context.summary == ""
    assert count_message_tokens(context.history) <= budget + SUMMARY_FRAMING_TOKENS
    # It is the newest turns that are kept, whole.
    assert context.history[-1]["content"] == conversation.messages.order_by("-id")[1].content
    assert context.history[0]["role"] == "user"
    assert len(context.history) % 2 == 0


def test_after_run_enqueues_only_when_over_budget(conversation, django_capture_on_commit_callbacks):
    add_turn(conversation, "q1", "a1")
    with django_capture_on_commit_callbacks() as callbacks:
        assert not memory_after_run(conversation=conversation, snapshot=snapshot_for(budget=400))
    assert callbacks == []

    for _ in range(10):
        add_turn(conversation, filler(30), filler(30))
    with django_capture_on_commit_callbacks() as callbacks:
        assert memory_after_run(conversation=conversation, snapshot=snapshot_for(budget=400))
    assert len(callbacks) == 1


@pytest.mark.parametrize("earlier_turns", [0, 1, 2, 3, 6])
def test_after_run_from_the_runs_context_decides_as_reading_the_branch_again(
    conversation, django_capture_on_commit_callbacks, earlier_turns
):
    """The run's end counts its own turn on top of what its context counted, instead of
    reading the branch again: the decision must be the same, around the budget's edge."""
    snapshot = snapshot_for(budget=400)
    for _ in range(earlier_turns):
        add_turn(conversation, filler(30), filler(30))
    question = ask(conversation, filler(20))
    context = memory_for_run(
        conversation=conversation, snapshot=snapshot, model_name="", before_message=question
    )
    run = AgentRun.objects.create(
        conversation=conversation, trigger_message=question, status=AgentRun.Status.RUNNING
    )
    answer = append(conversation, "assistant", filler(40))
    answer.run = run
    answer.save(update_fields=["run"])

    with django_capture_on_commit_callbacks() as read_again:
        expected = memory_after_run(conversation=conversation, snapshot=snapshot, run=run)
    with django_capture_on_commit_callbacks() as counted_on:
        decided = memory_after_run(
            conversation=conversation, snapshot=snapshot, run=run, context=context, answer=answer
        )
    assert decided == expected
    assert len(counted_on) == len(read_again) == int(expected)
    # Both outcomes are exercised: a short branch fits, a long one does not (the filler's
    # words vary, so the turns in between may fall either side of the budget).
    if earlier_turns == 0:
        assert not expected
    if earlier_turns >= 6:
        assert expected


def test_after_run_never_summarises_for_buffer_and_window(
    conversation, django_capture_on_commit_callbacks
):
    for _ in range(10):
        add_turn(conversation, filler(30), filler(30))
    with django_capture_on_commit_callbacks() as callbacks:
        assert not memory_after_run(
            conversation=conversation, snapshot=snapshot_for("buffer", budget=100)
        )
        assert not memory_after_run(
            conversation=conversation, snapshot=snapshot_for("window", budget=100)
        )
    assert callbacks == []


def test_compact_is_for_the_owner_only(conversation, other_user):
    add_turn(conversation, "q1", "a1")
    with pytest.raises(PermissionDenied):
        summary_request(conversation=conversation, user=other_user)


def test_compact_enqueues_at_once_when_there_is_something_to_fold(
    conversation, user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        assert summary_request(conversation=conversation, user=user) == NOTHING_TO_FOLD
    assert callbacks == []

    add_turn(conversation, "q1", "a1")
    with django_capture_on_commit_callbacks() as callbacks:
        assert summary_request(conversation=conversation, user=user) == SummaryRequest.QUEUED
    assert len(callbacks) == 1


def test_compact_does_not_fold_a_turn_whose_run_is_still_going(
    conversation, user, django_capture_on_commit_callbacks
):
    question = ask(conversation, "q1")
    AgentRun.objects.create(
        conversation=conversation, trigger_message=question, status=AgentRun.Status.RUNNING
    )
    with django_capture_on_commit_callbacks() as callbacks:
        assert summary_request(conversation=conversation, user=user) == NOTHING_TO_FOLD
    assert callbacks == []


def test_a_last_turn_bigger_than_the_budget_is_sent_shortened_not_dropped(conversation):
    add_turn(conversation, "small talk", "more small talk")
    add_turn(conversation, "Summarise this: " + filler(600), "It says: " + filler(600))
    question = ask(conversation, "And the second point?")

    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot_for(budget=200),
        model_name="",
        before_message=question,
    )

    assert [m["role"] for m in context.history] == ["user", "assistant"]
    assert context.history[0]["content"].startswith("Summarise this: ")
    assert context.history[1]["content"].startswith("It says: ")
    assert all(m["content"].endswith("[…]") for m in context.history)
    assert count_message_tokens(context.history) <= 200 + SUMMARY_FRAMING_TOKENS


def test_a_run_while_the_next_summary_is_pending_uses_the_previous_one_within_budget(
    conversation,
):
    budget = 400
    early = add_turn(conversation, "q1", "a1")
    previous = MemorySummary.objects.create(
        conversation=conversation,
        text="The user asked q1. " * 10,
        covers_from=early[0],
        covers_through=early[1],
    )
    for _ in range(25):  # far more than fits: the summariser has not caught up yet
        add_turn(conversation, filler(20), filler(20))
    question = ask(conversation)

    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot_for(budget=budget),
        model_name="",
        before_message=question,
    )

    assert context.summary_id == previous.pk
    assert context.summary == previous.text
    assert len(context.history) >= 4  # the newest turns that fit beside the old summary
    prompt = [{"role": "system", "content": context.summary}, *context.history]
    assert count_message_tokens(prompt) <= budget + SUMMARY_FRAMING_TOKENS
