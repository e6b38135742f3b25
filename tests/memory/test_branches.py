"""Memory follows the branch: a summary describes one path of the tree and is used only on
branches through its cut, and a run is sent its own branch's turns and no other's."""

from __future__ import annotations

import pytest

from agents.memory.selectors import summary_in_use
from agents.memory.services import memory_for_run
from agents.memory.summaries import memory_summary_create
from agents.models import AgentRun, MemorySummary, Message
from agents.services.branches import branch_switch
from agents.services.conversations import (
    conversation_create,
    message_edit_resend,
    message_send,
)
from tests.memory.conftest import add_turn, append, ask, filler, snapshot_for
from tests.memory.test_end_to_end import agent_or_summariser

BUDGET = 300
FACT_A = "Remember that my secret word is papaya."
FACT_B = "Remember that my favourite fruit is a mango."


def sent_to_model(run: AgentRun) -> str:
    return "\n".join(
        str(message.get("content") or "")
        for call in run.model_calls.all()
        for message in call.request_messages
    )


def runs_answering(question_ids: set[int]) -> list[AgentRun]:
    return list(AgentRun.objects.filter(trigger_message_id__in=question_ids).order_by("id"))


@pytest.mark.django_db(transaction=True)
def test_a_fact_said_only_on_one_branch_never_reaches_a_prompt_on_another(
    user, memory_profile, eager_tasks, scripted_server, summariser_name, settings
):
    settings.CHAT_SENDS_PER_MINUTE = 0
    scripted_server.policy(summariser_name, agent_or_summariser)
    conversation = conversation_create(owner=user, profile=memory_profile(budget=BUDGET))

    def say(text: str) -> Message:
        return message_send(conversation=conversation, user=user, content=text).message

    for n in range(3):
        say(f"Shared question {n}: {filler(20)}")
    fact_a = say(FACT_A)
    branch_a = [say(f"Question A{n}: {filler(20)}") for n in range(6)]

    # Edit the fact: branch B starts beside it, after the shared turns.
    fact_b = message_edit_resend(message=fact_a, user=user, content=FACT_B).message
    assert fact_b.parent_id == fact_a.parent_id
    branch_b = [say(f"Question B{n}: {filler(20)}") for n in range(6)]

    assert all(run.status == AgentRun.Status.SUCCEEDED for run in AgentRun.objects.all())
    on_a = {fact_a.pk, *(m.pk for m in branch_a)}
    on_b = {fact_b.pk, *(m.pk for m in branch_b)}
    # Each branch was summarised along itself.
    summaries = list(MemorySummary.objects.filter(conversation=conversation))
    through_a = [s for s in summaries if _on_branch(s.covers_through, on_a | {fact_a.pk})]
    through_b = [s for s in summaries if _on_branch(s.covers_through, on_b | {fact_b.pk})]
    assert through_a, "branch A went over the budget"
    assert through_b, "branch B went over the budget"
    assert any("papaya" in s.text for s in through_a)
    assert not any("papaya" in s.text for s in through_b)
    assert any("mango" in s.text for s in through_b)

    # No prompt on branch B ever carried the fact from branch A, verbatim or summarised.
    for run in runs_answering(on_b):
        assert "papaya" not in sent_to_model(run), run.pk
    assert "mango" in sent_to_model(runs_answering(on_b)[-1])

    # Back on branch A, the next question gets A's memory and nothing of B's.
    branch_switch(conversation=conversation, user=user, message_id=fact_a.pk)
    question = say("What was my secret word?")
    assert question.parent_id is not None
    assert question.parent.parent_id == branch_a[-1].pk
    (last_run,) = runs_answering({question.pk})
    sent = sent_to_model(last_run)
    assert "papaya" in sent
    assert "mango" not in sent
    marker = summary_in_use(conversation=conversation)
    assert marker is not None
    assert "papaya" in marker.text


def _on_branch(message: Message, branch_questions: set[int]) -> bool:
    """Whether a summary's last message is one of these questions or answers one of them."""
    return message.pk in branch_questions or message.parent_id in branch_questions


@pytest.mark.django_db
def test_a_summary_is_never_applied_to_a_branch_it_does_not_describe(
    conversation, summariser, summariser_name
):
    shared = add_turn(conversation, f"Shared: {filler(40)}", filler(40))
    on_a = add_turn(conversation, "Remember that I live in Porto.", filler(40))
    add_turn(conversation, filler(40), filler(40))
    summary_a = memory_summary_create(conversation=conversation, chat_model=summariser, force=True)
    assert summary_a is not None
    assert "Porto" in summary_a.text

    # Branch B: beside on_a's question, after the shared turn.
    question_b = append(conversation, "user", "Remember that I live in Oslo.", parent=shared[-1])
    append(conversation, "assistant", filler(20))
    assert summary_in_use(conversation=conversation) is None  # A's summary is not B's memory

    snapshot = snapshot_for(budget=2000)
    context = memory_for_run(
        conversation=conversation,
        snapshot=snapshot,
        model_name=summariser_name,
        before_message=ask(conversation, "Where do I live?"),
    )
    carried = context.summary + "\n".join(m["content"] for m in context.history)
    assert context.summary_id is None
    assert "Porto" not in carried
    assert "Oslo" in carried
    assert question_b.pk not in {m.pk for m in on_a}

    # Summarising B folds B's own path, on top of no summary of A's.
    summary_b = memory_summary_create(conversation=conversation, chat_model=summariser, force=True)
    assert summary_b is not None
    assert "Oslo" in summary_b.text
    assert "Porto" not in summary_b.text
    assert summary_b.covers_from_id == shared[0].pk
