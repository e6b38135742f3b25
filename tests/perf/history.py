"""Bulk-made history for the query-count tests and bench/query_counts.py."""

from __future__ import annotations

from agents.models import AgentRun, Conversation, Message, RunEvent

BATCH = 2000


def add_conversations(user, count: int) -> None:
    Conversation.objects.bulk_create(
        (Conversation(owner=user, title=f"history {i}") for i in range(count)), batch_size=BATCH
    )


def add_turns(conversation: Conversation, turns: int, *, words_per_message: int = 20) -> None:
    """``turns`` user+assistant message pairs, each with a run and its events."""
    conversation.refresh_from_db()
    start = conversation.last_seq
    messages = Message.objects.bulk_create(
        (
            Message(
                conversation=conversation,
                role=Message.Role.USER if i % 2 == 0 else Message.Role.ASSISTANT,
                content=f"message {i} " + "words " * words_per_message,
            )
            for i in range(turns * 2)
        ),
        batch_size=BATCH,
    )
    runs = AgentRun.objects.bulk_create(
        (
            AgentRun(
                conversation=conversation,
                trigger_message=messages[2 * i],
                status=AgentRun.Status.SUCCEEDED,
            )
            for i in range(turns)
        ),
        batch_size=BATCH,
    )
    RunEvent.objects.bulk_create(
        (
            RunEvent(
                conversation=conversation,
                run=runs[i // 2],
                seq=start + i + 1,
                type="step",
                payload={"kind": "thought", "text": f"thinking {i}"},
            )
            for i in range(turns * 2)
        ),
        batch_size=BATCH,
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=start + turns * 2)
    conversation.refresh_from_db()
