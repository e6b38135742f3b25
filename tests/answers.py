"""Finished answers stored the way the pipeline stores them, for tests of what readers do
with answers (feedback, shares): a question, a run with steps, and its answer."""

from __future__ import annotations

from django.utils import timezone

from agents.models import AgentRun, Conversation, Message, PromptVersion
from agents.protocol import FrameType, message_created_payload
from agents.react.types import ActionStep, FinalAnswerStep, ObservationStep, ThoughtStep
from agents.runs.log import event_append
from agents.runs.store import run_finish, run_record_step, run_started
from agents.services.branches import branch_activate


def finished_answer(
    *,
    conversation: Conversation,
    question: str = "What is 6 * 7?",
    answer: str = "**42**, says the calculator.",
    profile_version: PromptVersion | None = None,
) -> Message:
    """One finished turn in ``conversation``; returns the answer message."""
    conversation.refresh_from_db(fields=["active_leaf"])
    asked = Message.objects.create(
        conversation=conversation,
        role="user",
        content=question,
        parent_id=conversation.active_leaf_id,
    )
    branch_activate(conversation=conversation, leaf_id=asked.pk)
    run = AgentRun.objects.create(
        conversation=conversation,
        trigger_message=asked,
        profile_version=profile_version,
        model_name="demo",
        status=AgentRun.Status.RUNNING,
        attempts=1,
        started_at=timezone.now(),
    )
    # What message_send logs, without its rate limit and queue: tests make many turns.
    event_append(
        conversation=conversation,
        run=run,
        type=FrameType.MESSAGE_CREATED,
        payload=message_created_payload(asked),
    )
    run_started(run=run, model="demo", profile=str(profile_version or "-"))
    for step in (
        ThoughtStep(text="I should use the calculator."),
        ActionStep(tool="calculator", tool_input="6 * 7", call_id="call-1"),
        ObservationStep(tool="calculator", call_id="call-1", text="42"),
    ):
        run_record_step(run=run, step=step)
    message = run_finish(run=run, step=FinalAnswerStep(text=answer))
    assert message is not None
    return message
