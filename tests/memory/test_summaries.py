"""Summarising through the scripted model: what is folded, what is kept, what is stored."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from agents.llm.scripted import Fail, Reply
from agents.memory.selectors import summary_in_use, summary_list
from agents.memory.services import memory_for_run
from agents.memory.strategies import split_turns
from agents.memory.summaries import memory_summary_create
from agents.models import AgentRun, MemorySummary, Message, RunEvent
from agents.profile_snapshot import ProfileSnapshot
from agents.react.errors import ModelBadResponse, ModelUnavailable
from agents.react.types import ActionStep, ObservationStep, step_to_event
from tests.memory.conftest import (
    add_turn,
    append,
    ask,
    assert_summaries_tile_the_history,
    filler,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def profiled(conversation, memory_profile):
    def use(**settings):
        conversation.profile = memory_profile(**settings)
        conversation.save(update_fields=["profile"])
        return ProfileSnapshot.from_profile(conversation.profile)

    return use


def test_nothing_is_summarised_while_the_conversation_fits(
    conversation, profiled, summariser, scripted_server, summariser_name
):
    profiled(budget=1000)
    add_turn(conversation, "q1", "a1")

    assert memory_summary_create(conversation=conversation, chat_model=summariser) is None
    assert scripted_server.requests(summariser_name) == []


def test_old_turns_are_folded_and_the_newest_kept_verbatim(
    conversation, profiled, summariser, scripted_server, summariser_name
):
    snapshot = profiled(budget=400)
    add_turn(conversation, "Remember that my name is Ada.", "Noted, Ada.")
    for _ in range(8):
        add_turn(conversation, filler(25), filler(25))

    summary = memory_summary_create(conversation=conversation, chat_model=summariser)

    assert summary is not None
    assert "Remember that my name is Ada." in summary.text
    assert summary.covers_from == conversation.messages.order_by("id").first()
    assert summary.model_name == summariser_name
    assert summary.token_count > 0
    rows = assert_summaries_tile_the_history(conversation)
    assert rows[-1] == summary
    # The verbatim turns left after the cut fit their share of the budget, and the next run
    # gets the summary and all of them.
    settings = snapshot.memory
    after_cut = conversation.messages.filter(id__gt=summary.covers_through_id).order_by("id")
    rest = split_turns([_history_message(m) for m in after_cut])
    assert 1 <= len(rest) < 9
    assert sum(turn.tokens for turn in rest) <= settings.keep_verbatim_tokens
    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot,
        model_name=summariser_name,
        before_message=ask(conversation),
    )
    assert context.summary == summary.text
    assert context.summary_id == summary.pk
    assert [m["content"] for m in context.history] == [m.content for m in after_cut]
    # The model was asked with the progressive prompt: empty memory, then the new lines.
    (request,) = scripted_server.requests(summariser_name)
    prompt = request["messages"][0]["content"]
    assert "Memory so far:\n(nothing yet" in prompt
    assert "User: Remember that my name is Ada.\nAssistant: Noted, Ada." in prompt


def test_each_summary_builds_on_the_previous_one(
    conversation, profiled, summariser, scripted_server, summariser_name
):
    profiled(budget=300)
    add_turn(conversation, "Remember that I live in Porto.", "Porto, noted.")
    for _ in range(6):
        add_turn(conversation, filler(25), filler(25))
    first = memory_summary_create(conversation=conversation, chat_model=summariser)
    add_turn(conversation, "Please remember the deadline is Friday.", "Friday it is.")
    for _ in range(6):
        add_turn(conversation, filler(25), filler(25))

    second = memory_summary_create(conversation=conversation, chat_model=summariser)

    assert second.covers_from_id > first.covers_through_id
    assert "I live in Porto" in second.text
    assert "the deadline is Friday" in second.text
    last_prompt = scripted_server.requests(summariser_name)[-1]["messages"][0]["content"]
    assert first.text in last_prompt  # the current summary is sent with the new lines
    assert len(assert_summaries_tile_the_history(conversation)) >= 2


def test_compact_folds_every_finished_turn(conversation, profiled, summariser):
    profiled(budget=2000)
    add_turn(conversation, "q1", "a1")
    last = add_turn(conversation, "q2", "a2")

    summary = memory_summary_create(conversation=conversation, chat_model=summariser, force=True)

    assert summary.covers_through == last[-1]
    assert memory_summary_create(conversation=conversation, chat_model=summariser, force=True) is (
        None
    )
    assert MemorySummary.objects.filter(conversation=conversation).count() == 1


def test_a_turn_still_being_answered_is_left_out_of_the_summary(conversation, profiled, summariser):
    profiled(budget=2000)
    done = add_turn(conversation, "q1", "a1")
    running = ask(conversation, "q2")
    AgentRun.objects.create(
        conversation=conversation, trigger_message=running, status=AgentRun.Status.RUNNING
    )

    summary = memory_summary_create(conversation=conversation, chat_model=summariser, force=True)

    assert summary.covers_through == done[-1]


def test_a_tool_heavy_turn_is_folded_or_kept_whole(conversation, profiled, summariser):
    """The run's tool calls and observations are its own events; the cut falls between turns."""
    profiled(budget=400)
    add_turn(conversation, filler(30), filler(30))
    question = ask(conversation, "What is 12 * 7, then 84 / 2?")
    run = AgentRun.objects.create(
        conversation=conversation, trigger_message=question, status=AgentRun.Status.SUCCEEDED
    )
    steps = [
        ActionStep(tool="calculator", tool_input="12*7", call_id="c1"),
        ObservationStep(tool="calculator", call_id="c1", text="84"),
        ActionStep(tool="calculator", tool_input="84/2", call_id="c2"),
        ObservationStep(tool="calculator", call_id="c2", text="42"),
    ]
    for seq, step in enumerate(steps, start=1):
        RunEvent.objects.create(
            conversation=conversation, run=run, seq=seq, type="step", payload=step_to_event(step)
        )
    answer = append(conversation, "assistant", "84, then 42. " * 40)
    Message.objects.filter(pk=answer.pk).update(run=run)
    for _ in range(3):
        add_turn(conversation, filler(25), filler(25))

    memory_summary_create(conversation=conversation, chat_model=summariser)

    rows = assert_summaries_tile_the_history(conversation)
    assert rows
    for row in rows:
        assert row.covers_through.role == "assistant"
        # The question and the answer its tool calls led to sit on the same side of every cut.
        assert (question.pk <= row.covers_through_id) == (answer.pk <= row.covers_through_id)
    assert rows[-1].covers_through_id >= answer.pk  # this cut did fall after the heavy turn
    context = memory_for_run(
        conversation=conversation,
        snapshot=ProfileSnapshot.from_profile(conversation.profile),
        model_name="",
        before_message=ask(conversation),
    )
    roles = [m["role"] for m in context.history]
    assert roles[:1] == ["user"]
    assert roles == ["user", "assistant"] * (len(roles) // 2)


def test_a_failing_model_stores_nothing_and_loses_no_message(
    conversation, profiled, summariser, scripted_server, summariser_name
):
    snapshot = profiled(budget=300)
    for _ in range(8):
        add_turn(conversation, filler(25), filler(25))
    before = list(conversation.messages.order_by("id").values_list("id", "role", "content"))
    scripted_server.script(summariser_name, [Fail(500), Reply("   ")])

    with pytest.raises(ModelUnavailable):
        memory_summary_create(conversation=conversation, chat_model=summariser)
    with pytest.raises(ModelBadResponse, match="empty text"):
        memory_summary_create(conversation=conversation, chat_model=summariser)

    assert not MemorySummary.objects.filter(conversation=conversation).exists()
    assert list(conversation.messages.order_by("id").values_list("id", "role", "content")) == (
        before
    )
    # Meanwhile runs still get a bounded window of the newest turns.
    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot,
        model_name="",
        before_message=ask(conversation),
    )
    assert context.summary == ""
    assert 0 < len(context.history) < len(before)
    assert context.history[-1]["content"] == before[-1][2]


def test_a_deleted_tail_takes_its_summaries_with_it(conversation, profiled, summariser):
    """An edit-and-resend deletes later messages; summaries covering them go too."""
    profiled(budget=2000)
    first = add_turn(conversation, "q1", "a1")
    kept = memory_summary_create(conversation=conversation, chat_model=summariser, force=True)
    second = add_turn(conversation, "q2", "a2")
    memory_summary_create(conversation=conversation, chat_model=summariser, force=True)

    Message.objects.filter(id__gte=second[0].pk).delete()

    assert list(MemorySummary.objects.filter(conversation=conversation)) == [kept]
    assert kept.covers_through == first[-1]
    assert_summaries_tile_the_history(conversation)


def _history_message(message: Message):
    from agents.memory.strategies import HistoryMessage

    return HistoryMessage(id=message.pk, role=message.role, content=message.content)


def test_selectors_give_the_summary_in_use_and_the_whole_chain(conversation, profiled, summariser):
    profiled(budget=2000)
    assert summary_in_use(conversation=conversation) is None
    add_turn(conversation, "q1", "a1")
    first = memory_summary_create(conversation=conversation, chat_model=summariser, force=True)
    add_turn(conversation, "q2", "a2")
    second = memory_summary_create(conversation=conversation, chat_model=summariser, force=True)

    assert summary_in_use(conversation=conversation) == second
    assert summary_list(conversation=conversation) == [first, second]


def test_a_summary_range_must_run_forwards(conversation):
    first, last = add_turn(conversation, "q1", "a1")

    with pytest.raises(IntegrityError), transaction.atomic():
        MemorySummary.objects.create(
            conversation=conversation, text="backwards", covers_from=last, covers_through=first
        )
    MemorySummary.objects.create(
        conversation=conversation, text="one", covers_from=first, covers_through=last
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        MemorySummary.objects.create(
            conversation=conversation, text="same cut", covers_from=first, covers_through=last
        )
