"""Conversations built turn by turn, and profile snapshots with a chosen memory strategy."""

from __future__ import annotations

import itertools

import pytest

from agents.llm.client import OpenAIChatModel
from agents.llm.scripted import ScriptedServer
from agents.memory.testing import summariser_policy
from agents.models import AgentProfile, Conversation, MemorySummary, Message, ModelConfig
from agents.profile_snapshot import ProfileSnapshot
from agents.services.branches import branch_activate
from chatsite.celery import app as celery_app
from tests.isolation import private_cache_prefix

_words = itertools.count(1)


def snapshot_for(
    strategy: str = "summary_buffer", *, window: int = 3, budget: int = 400, **extra
) -> ProfileSnapshot:
    return ProfileSnapshot.from_json(
        {
            "memory_strategy": strategy,
            "memory_window_turns": window,
            "memory_token_budget": budget,
            **extra,
        }
    )


def filler(words: int) -> str:
    """Distinct words, so token counts grow with ``words`` and no two turns look alike."""
    return " ".join(f"word{next(_words)}" for _ in range(words))


def append(
    conversation: Conversation, role: str, content: str, *, parent: Message | str | None = "leaf"
) -> Message:
    """A message below ``parent`` (by default the end of the active branch), which then ends
    the active branch, as sending and answering do."""
    conversation.refresh_from_db(fields=["active_leaf"])
    parent_id = conversation.active_leaf_id if parent == "leaf" else getattr(parent, "pk", None)
    message = Message.objects.create(
        conversation=conversation, role=role, content=content, parent_id=parent_id
    )
    branch_activate(conversation=conversation, leaf_id=message.pk)
    return message


def add_turn(conversation: Conversation, question: str, answer: str | None = "") -> list[Message]:
    """A user message and (unless ``answer`` is None) the assistant's answer to it."""
    messages = [append(conversation, "user", question)]
    if answer is not None:
        messages.append(append(conversation, "assistant", answer or filler(8)))
    return messages


def ask(conversation: Conversation, question: str = "") -> Message:
    """The user message that triggers the next run (no answer yet)."""
    return append(conversation, "user", question or filler(5))


@pytest.fixture(autouse=True)
def _private_cache(settings):
    """/compact's pending marks and rate-limit counters live in Redis: a prefix per test."""
    caches = {name: dict(config) for name, config in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = private_cache_prefix()
    settings.CACHES = caches


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user, title="memory test")


# --------------------------------------------------------------------------------------
# The summarising model: the scripted OpenAI-compatible server with a note-keeping policy
# --------------------------------------------------------------------------------------

_model_names = itertools.count(1)


@pytest.fixture(scope="session")
def scripted_server():
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def summariser_name(scripted_server) -> str:
    """A model name of this test's own, answered by the note-keeping summariser policy."""
    name = f"memory-summariser-{next(_model_names)}"
    scripted_server.policy(name, summariser_policy)
    return name


@pytest.fixture
def summariser(scripted_server, summariser_name) -> OpenAIChatModel:
    return OpenAIChatModel(
        base_url=scripted_server.base_url,
        api_key="",
        model=summariser_name,
        deadline_seconds=10,
        max_retries=0,
    )


@pytest.fixture
def memory_profile(db, scripted_server, summariser_name):
    """A profile whose model is the scripted summariser, with the given memory settings."""

    def make(strategy: str = "summary_buffer", *, budget: int = 400, window: int = 3):
        model_config = ModelConfig.objects.create(
            name=summariser_name,
            base_url=scripted_server.base_url,
            model=summariser_name,
            max_retries=0,
            request_timeout_seconds=10,
        )
        return AgentProfile.objects.create(
            name=f"Memory {summariser_name}",
            slug=summariser_name,
            model_config=model_config,
            memory_strategy=strategy,
            memory_token_budget=budget,
            memory_window_turns=window,
        )

    return make


@pytest.fixture
def eager_tasks():
    """Celery runs tasks in the calling thread (and retries inline) for this test."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


def assert_summaries_tile_the_history(conversation: Conversation) -> list[MemorySummary]:
    """Each row adds the lines right after the previous row's cut, through a turn's end."""
    rows = list(MemorySummary.objects.filter(conversation=conversation).order_by("id"))
    message_ids = list(conversation.messages.order_by("id").values_list("id", flat=True))
    roles = dict(conversation.messages.values_list("id", "role"))
    expected_from = message_ids[0] if message_ids else None
    for row in rows:
        assert row.covers_from_id == expected_from, "a gap or an overlap between summaries"
        assert row.covers_through_id >= row.covers_from_id
        after = message_ids.index(row.covers_through_id) + 1
        if after < len(message_ids):
            assert roles[message_ids[after]] == "user", "a cut inside a turn"
            expected_from = message_ids[after]
        else:
            expected_from = None
    throughs = [row.covers_through_id for row in rows]
    assert throughs == sorted(set(throughs)), "covers_through must strictly increase"
    return rows
