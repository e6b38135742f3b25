"""Memory inside real runs: message_send queues a run, Celery runs it (eagerly), the engine
asks the scripted model, and afterwards the summariser folds old turns with the same model."""

from __future__ import annotations

import pytest

from agents.llm.scripted import Reply
from agents.memory.testing import summariser_policy
from agents.models import AgentRun, MemorySummary
from agents.services.conversations import conversation_create, message_send
from tests.memory.conftest import assert_summaries_tile_the_history, filler

pytestmark = pytest.mark.django_db(transaction=True)

BUDGET = 300


def agent_or_summariser(body: dict) -> Reply:
    prompt = "\n".join(str(m.get("content") or "") for m in body["messages"])
    if "New lines:" in prompt and "Updated memory:" in prompt:
        return summariser_policy(body)
    return Reply(f"Thought: I can answer that myself.\nFinal Answer: {filler(30)}")


def test_later_runs_get_the_summary_and_only_recent_turns(
    user, memory_profile, eager_tasks, scripted_server, summariser_name, settings
):
    settings.CHAT_SENDS_PER_MINUTE = 0
    scripted_server.policy(summariser_name, agent_or_summariser)
    conversation = conversation_create(owner=user, profile=memory_profile(budget=BUDGET))
    early_question = f"An early question about {filler(20)}"
    questions = ["Remember that my name is Lin.", early_question]
    questions += [f"Question {n}: {filler(20)}" for n in range(10)]

    for question in questions:
        message_send(conversation=conversation, user=user, content=question)

    runs = list(AgentRun.objects.filter(conversation=conversation).order_by("id"))
    assert [run.status for run in runs] == [AgentRun.Status.SUCCEEDED] * len(questions)
    assert conversation.messages.count() == 2 * len(questions)
    rows = assert_summaries_tile_the_history(conversation)
    assert rows, "the conversation went over its budget, so it was summarised"
    # What the model was sent on the last run: the summary with the planted fact, the recent
    # turns, and not the early question verbatim.
    first_call = runs[-1].model_calls.order_by("index").first()
    sent = "\n".join(str(m.get("content") or "") for m in first_call.request_messages)
    in_use = MemorySummary.objects.filter(created_at__lt=runs[-1].started_at).order_by("-id")
    assert in_use.first().text in sent
    assert "Remember that my name is Lin." in sent
    assert early_question not in sent
    assert questions[-2] in sent
