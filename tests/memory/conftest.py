"""Conversations built turn by turn, and profile snapshots with a chosen memory strategy."""

from __future__ import annotations

import itertools

import pytest

from agents.models import Conversation, Message

_words = itertools.count(1)


def snapshot_for(
    strategy: str = "summary_buffer", *, window: int = 3, budget: int = 400, **extra
) -> dict:
    return {
        "memory_strategy": strategy,
        "memory_window_turns": window,
        "memory_token_budget": budget,
        **extra,
    }


def filler(words: int) -> str:
    """Distinct words, so token counts grow with ``words`` and no two turns look alike."""
    return " ".join(f"word{next(_words)}" for _ in range(words))


def add_turn(conversation: Conversation, question: str, answer: str | None = "") -> list[Message]:
    """A user message and (unless ``answer`` is None) the assistant's answer to it."""
    messages = [Message.objects.create(conversation=conversation, role="user", content=question)]
    if answer is not None:
        messages.append(
            Message.objects.create(
                conversation=conversation, role="assistant", content=answer or filler(8)
            )
        )
    return messages


def ask(conversation: Conversation, question: str = "") -> Message:
    """The user message that triggers the next run (no answer yet)."""
    return Message.objects.create(
        conversation=conversation, role="user", content=question or filler(5)
    )


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user, title="memory test")
