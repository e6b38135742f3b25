"""The run store's contract (agents/runs/base.py), held by both implementations.

Each test runs once per store: the portable ORM store and the PostgreSQL statements. Both run
on PostgreSQL (the portable one must work there too); on SQLite the PostgreSQL store is
skipped. What one store guarantees and the other does not is a failure here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agents import events
from agents.db.statements import fenced_statements_supported
from agents.models import (
    AgentProfile,
    AgentRun,
    Attachment,
    Conversation,
    Message,
    ModelCall,
    Schedule,
    ScheduleFiring,
    UsageEntry,
    UserPreference,
)
from agents.protocol import FrameType
from agents.react.types import FinalAnswerStep, ModelCallRecord, ObservationStep, ThoughtStep
from agents.runs.base import RunLost, RunStore, StartInputs
from agents.runs.portable import PortableRunStore, start_inputs
from agents.runs.postgres import PostgresRunStore
from agents.services.conversations import conversation_create, message_send
from chatsite.server.loop import run_on_process_loop

pytestmark = [pytest.mark.contract, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=["portable", "postgres"])
def store(request) -> RunStore:
    if request.param == "portable":
        return PortableRunStore()
    if not fenced_statements_supported():
        pytest.skip("the PostgreSQL store's statements need PostgreSQL (no DATABASE_URL)")
    return PostgresRunStore()


@pytest.fixture(params=["sync", "loop"])
def record(request, store) -> Callable[..., Any]:
    """A fenced write of steps as a sync caller makes it, and as the run driver makes it
    from the process's event loop."""
    if request.param == "sync":
        return store.record

    def on_loop(**kwargs: Any) -> Any:
        return run_on_process_loop(store.arecord(**kwargs))

    return on_loop


class Published:
    """Every frame handed to the publisher, by conversation, in order."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, dict[str, Any]]] = []

    def send(self, conversation_id: int, frames: list[dict[str, Any]]) -> None:
        self.frames.extend((conversation_id, frame) for frame in frames)

    def types(self) -> list[str]:
        return [frame["type"] for _, frame in self.frames]


@pytest.fixture
def published(monkeypatch) -> Published:
    recorder = Published()
    monkeypatch.setattr(events, "_publisher", lambda: recorder)
    return recorder


@pytest.fixture
def queued(user) -> AgentRun:
    AgentProfile.objects.get(is_default=True)  # seeded with the database
    conversation = conversation_create(owner=user)
    return message_send(conversation=conversation, user=user, content="What is 6*7?").run


def _claimed(store: RunStore, run: AgentRun, worker: str) -> AgentRun:
    claim = store.claim(run_id=run.pk, worker_id=worker, announce=False)
    assert claim is not None
    return claim.run


def _stale(run: AgentRun, settings) -> None:
    stale = timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_STALE_SECONDS + 1)
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=stale)


def _call(prompt: int, completion: int) -> ModelCallRecord:
    return ModelCallRecord(
        index=0,
        messages=[{"role": "user", "content": "q"}],
        options={},
        response_text="Thought: multiply",
        prompt_tokens=prompt,
        completion_tokens=completion,
    )


def _observation(text: str) -> ObservationStep:
    return ObservationStep(text=text, tool="calculator", call_id="call-1")


def _seqs(conversation_id: int) -> list[int]:
    rows = Conversation.objects.get(pk=conversation_id).events.order_by("seq")
    return list(rows.values_list("seq", flat=True))


# --------------------------------------------------------------------------------------
# The claim
# --------------------------------------------------------------------------------------


def test_of_two_racing_claims_one_wins(store, queued):
    start = threading.Barrier(2)
    won: list[str] = []

    def claim(worker: str) -> None:
        try:
            start.wait()
            if store.claim(run_id=queued.pk, worker_id=worker, announce=False) is not None:
                won.append(worker)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(worker,)) for worker in ("w1", "w2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(won) == 1
    queued.refresh_from_db()
    assert (queued.worker_id, queued.attempts) == (won[0], 1)


def test_a_fresh_heartbeat_blocks_a_claim_and_a_stale_one_does_not(store, queued, settings):
    _claimed(store, queued, "w1")
    assert store.claim(run_id=queued.pk, worker_id="w2", announce=False) is None

    _stale(queued, settings)
    taken = _claimed(store, queued, "w2")

    assert (taken.worker_id, taken.attempts, taken.status) == ("w2", 2, AgentRun.Status.RUNNING)


def test_a_claim_reads_what_the_run_starts_with(store, queued, user):
    run = _claimed(store, queued, "w1")

    assert run.conversation.owner == user
    assert run.trigger_message.content == "What is 6*7?"
    assert run.profile_version is not None


@pytest.mark.parametrize(
    ("firing", "preference", "files", "expected"),
    [
        # Nothing beside the run: the profile's budget, no instructions, no file.
        (None, None, (), StartInputs(None, "", False)),
        # A firing with a budget, the owner's instructions, a file read (among others not).
        (
            3,
            "Answer in French.",
            ("reading", "ready", "failed"),
            StartInputs(3, "Answer in French.", True),
        ),
        # A firing without a budget, instructions emptied, files not (or not yet) read.
        ("no budget", "", ("reading", "failed"), StartInputs(None, "", False)),
    ],
    ids=["nothing", "everything", "rows-that-give-nothing"],
)
def test_a_claim_reads_the_inputs_the_selectors_define(
    store, queued, user, firing, preference, files, expected
):
    schedule = Schedule.objects.create(
        owner=user,
        profile=AgentProfile.objects.get(is_default=True),
        title="Digest",
        prompt="Summarise my day.",
        starts_at=timezone.now(),
    )
    other_run = message_send(
        conversation=conversation_create(owner=user), user=user, content="Elsewhere"
    ).run
    # Rows of another run and another conversation must not count for this one.
    ScheduleFiring.objects.create(
        schedule=schedule, occurrence=timezone.now(), run=other_run, budget_steps=9
    )
    _attach(other_run.conversation, user, "ready")
    if firing is not None:
        ScheduleFiring.objects.create(
            schedule=schedule,
            occurrence=timezone.now() + timedelta(hours=1),
            run=queued,
            budget_steps=None if firing == "no budget" else firing,
        )
    if preference is not None:
        UserPreference.objects.create(user=user, custom_instructions=preference)
    for state in files:
        _attach(queued.conversation, user, state)

    claim = store.claim(run_id=queued.pk, worker_id="w1", announce=False)

    assert claim is not None
    assert claim.inputs == expected
    assert claim.inputs == start_inputs(claim.run)  # each from its selector


def _attach(conversation: Conversation, user, state: str) -> None:
    Attachment.objects.create(
        conversation=conversation,
        owner=user,
        name=f"{state}.txt",
        kind=Attachment.Kind.TEXT,
        size=1,
        file=f"{state}.txt",
        state=state,
    )


def test_an_ended_run_is_not_claimed(store, queued):
    run = _claimed(store, queued, "w1")
    assert store.fail(run=run, code="x", message="Stopped.", worker_id="w1")

    assert store.claim(run_id=queued.pk, worker_id="w2", announce=False) is None


# --------------------------------------------------------------------------------------
# The fence
# --------------------------------------------------------------------------------------


def test_a_worker_that_lost_the_run_writes_nothing(store, record, queued, settings, published):
    run = _claimed(store, queued, "w1")
    _stale(run, settings)
    _claimed(store, queued, "w2")
    events_before = _seqs(run.conversation_id)
    entry_before = UsageEntry.objects.values("prompt_tokens", "completion_tokens").get(
        run_id=run.pk
    )

    with pytest.raises(RunLost):
        record(run=run, steps=[_call(30, 5), ThoughtStep(text="six sevens")], worker_id="w1")
    with pytest.raises(RunLost):
        record(run=run, steps=[_observation("42")], worker_id="w1")

    assert _seqs(run.conversation_id) == events_before
    assert not ModelCall.objects.filter(run=run).exists()
    stored = AgentRun.objects.get(pk=run.pk)
    assert (stored.prompt_tokens, stored.completion_tokens, stored.worker_id) == (0, 0, "w2")
    assert (
        UsageEntry.objects.values("prompt_tokens", "completion_tokens").get(run_id=run.pk)
        == entry_before
    )
    assert published.frames == []


def test_an_end_or_start_by_a_worker_that_lost_the_run_writes_nothing(
    store, queued, settings, published
):
    run = _claimed(store, queued, "w1")
    _stale(run, settings)
    _claimed(store, queued, "w2")
    events_before = _seqs(run.conversation_id)

    with pytest.raises(RunLost):
        store.start(run=run, model="m", profile="p", worker_id="w1")
    answer = store.finish(
        run=run, step=FinalAnswerStep(text="42"), worker_id="w1", preceding=[_call(9, 9)]
    )
    assert answer is None
    assert not store.fail(run=run, code="x", message="Failed.", worker_id="w1")
    assert not store.cancel(run=run, partial_answer="4", worker_id="w1")

    assert _seqs(run.conversation_id) == events_before
    assert not Message.objects.filter(role=Message.Role.ASSISTANT).exists()
    assert not ModelCall.objects.filter(run=run).exists()
    assert AgentRun.objects.get(pk=run.pk).status == AgentRun.Status.RUNNING
    assert published.frames == []


def test_the_heartbeat_moves_only_for_runs_the_worker_holds(store, queued, settings):
    run = _claimed(store, queued, "w1")

    assert store.heartbeat(run_ids=[run.pk], worker_id="w1") == {run.pk}
    assert store.heartbeat(run_ids=[run.pk], worker_id="w2") == set()
    assert store.heartbeat(run_ids=[], worker_id="w1") == set()


# --------------------------------------------------------------------------------------
# The event log
# --------------------------------------------------------------------------------------


def test_seq_goes_up_by_one_per_event_under_concurrent_writes(store, queued):
    run = _claimed(store, queued, "w1")
    writers, per_writer = 2, 10
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            start.wait()
            mine = AgentRun.objects.select_related("conversation").get(pk=run.pk)
            for i in range(per_writer):
                step = _observation(f"{n}:{i}")
                store.record(run=mine, steps=[step, step], worker_id="w1")
        except BaseException as error:  # surfaced below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    seqs = _seqs(run.conversation_id)
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) == 1 + writers * per_writer * 2  # message.created, then the steps
    assert Conversation.objects.get(pk=run.conversation_id).last_seq == seqs[-1]


def test_events_are_published_only_after_commit(store, queued, published):
    run = _claimed(store, queued, "w1")

    def rolled_back() -> None:
        with transaction.atomic():
            store.record(run=run, steps=[_observation("rolled back")], worker_id="w1")
            raise RuntimeError("the caller's transaction rolls back")

    with pytest.raises(RuntimeError):
        rolled_back()
    assert published.frames == []
    assert _seqs(run.conversation_id) == [1]

    run = AgentRun.objects.select_related("conversation").get(pk=run.pk)
    with transaction.atomic():
        stored = store.record(run=run, steps=[_observation("kept")], worker_id="w1")
        assert published.frames == []  # not before the commit
    assert [frame["seq"] for _, frame in published.frames] == [event.seq for event in stored]
    assert published.types() == [FrameType.STEP]
    assert {conversation for conversation, _ in published.frames} == {run.conversation_id}


def test_a_write_from_the_loop_is_published_once_it_has_committed(store, queued, published):
    run = _claimed(store, queued, "w1")

    stored = run_on_process_loop(store.arecord(run=run, steps=[_observation("42")], worker_id="w1"))

    assert [frame["seq"] for _, frame in published.frames] == [event.seq for event in stored]
    steps = run.events.filter(type=FrameType.STEP)
    assert list(steps.values_list("seq", flat=True)) == [event.seq for event in stored]


# --------------------------------------------------------------------------------------
# Tokens and the ledger
# --------------------------------------------------------------------------------------


def test_a_calls_tokens_reach_the_run_and_its_ledger_entry(store, record, queued):
    run = _claimed(store, queued, "w1")

    record(run=run, steps=[_call(30, 5), ThoughtStep(text="multiply")], worker_id="w1")
    record(run=run, steps=[_call(7, 1)], worker_id="w1")

    stored = AgentRun.objects.get(pk=run.pk)
    assert (stored.prompt_tokens, stored.completion_tokens) == (37, 6)
    assert (run.prompt_tokens, run.completion_tokens) == (37, 6)
    entry = UsageEntry.objects.get(run_id=run.pk)
    assert (entry.prompt_tokens, entry.completion_tokens) == (37, 6)
    assert list(ModelCall.objects.filter(run=run).values_list("index", flat=True)) == [0, 1]


def test_a_run_without_a_ledger_entry_gets_one_with_its_first_call(store, record, queued, user):
    run = _claimed(store, queued, "w1")
    UsageEntry.objects.filter(run_id=run.pk).delete()  # queued before the ledger existed

    record(run=run, steps=[_call(12, 3)], worker_id="w1")
    record(run=run, steps=[_call(1, 1)], worker_id="w1")

    entry = UsageEntry.objects.get(run_id=run.pk)
    assert (entry.user_id, entry.kind, entry.conversation_id) == (
        user.pk,
        UsageEntry.Kind.RUN,
        run.conversation_id,
    )
    assert entry.model_config_id == run.model_config_id
    assert (entry.prompt_tokens, entry.completion_tokens, entry.reserved_tokens) == (13, 4, 0)
    assert entry.created_at == AgentRun.objects.get(pk=run.pk).created_at


def test_a_write_without_calls_leaves_the_ledger_alone(store, record, queued):
    run = _claimed(store, queued, "w1")
    UsageEntry.objects.filter(run_id=run.pk).delete()

    record(run=run, steps=[_observation("no call")], worker_id="w1")

    assert not UsageEntry.objects.filter(run_id=run.pk).exists()


# --------------------------------------------------------------------------------------
# How a run ends, and handing it back
# --------------------------------------------------------------------------------------


def test_finish_stores_the_answer_under_its_question_and_ends_the_branch(store, queued, published):
    run = _claimed(store, queued, "w1")

    answer = store.finish(
        run=run,
        step=FinalAnswerStep(text="It is 42."),
        worker_id="w1",
        preceding=[_call(20, 3), ThoughtStep(text="I have it.")],
    )

    assert answer is not None
    stored = Message.objects.get(pk=answer.pk)
    assert (stored.parent_id, stored.content, stored.on_active_branch) == (
        run.trigger_message_id,
        "It is 42.",
        True,
    )
    assert Conversation.objects.get(pk=run.conversation_id).active_leaf_id == answer.pk
    ended = AgentRun.objects.get(pk=run.pk)
    assert (ended.status, ended.heartbeat_at, ended.prompt_tokens) == (
        AgentRun.Status.SUCCEEDED,
        None,
        20,
    )
    finished = ended.events.get(type=FrameType.RUN_FINISHED)
    assert finished.payload["message"]["id"] == answer.pk
    assert published.types() == [FrameType.STEP, FrameType.RUN_FINISHED]
    assert _seqs(run.conversation_id) == [1, 2, 3]


def test_an_answer_to_a_question_the_owner_left_does_not_move_the_branch(store, queued):
    run = _claimed(store, queued, "w1")
    elsewhere = Message.objects.create(
        conversation_id=run.conversation_id, role=Message.Role.USER, content="another branch"
    )
    Conversation.objects.filter(pk=run.conversation_id).update(active_leaf_id=elsewhere.pk)

    answer = store.finish(run=run, step=FinalAnswerStep(text="42"), worker_id="w1")

    assert answer is not None
    assert Message.objects.get(pk=answer.pk).on_active_branch is False
    assert Message.objects.get(pk=answer.pk).parent_id == run.trigger_message_id
    assert Conversation.objects.get(pk=run.conversation_id).active_leaf_id == elsewhere.pk


def test_release_hands_a_run_back_for_the_next_claim_at_once(store, record, queued):
    run = _claimed(store, queued, "w1")
    record(run=run, steps=[_observation("kept")], worker_id="w1")

    assert store.release(run_ids=[run.pk], worker_id="w2") == []
    assert store.release(run_ids=[run.pk], worker_id="w1") == [run.pk]

    released = AgentRun.objects.get(pk=run.pk)
    assert (released.worker_id, released.heartbeat_at) == ("", None)
    assert _claimed(store, queued, "w2").worker_id == "w2"
    with pytest.raises(RunLost):
        record(run=run, steps=[_observation("too late")], worker_id="w1")
    assert run.events.filter(type=FrameType.STEP).count() == 1


def test_cancel_requests_and_the_rescue_list(store, queued, settings):
    run = _claimed(store, queued, "w1")
    assert store.cancel_requested(run_ids=[run.pk]) == set()
    AgentRun.objects.filter(pk=run.pk).update(cancel_requested_at=timezone.now())
    assert store.cancel_requested(run_ids=[run.pk]) == {run.pk}

    assert run.pk not in store.needing_rescue(queued_for_seconds=60)
    _stale(run, settings)
    assert run.pk in store.needing_rescue(queued_for_seconds=60)


# --------------------------------------------------------------------------------------
# A parent waiting for its sub-agents (agents/runs/waits.py)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("ending", ["finish", "finish_on_loop", "fail", "cancel"])
def test_a_childs_end_queues_its_waiting_parent_once(store, queued, ending):
    from agents.services.subagents import run_wait_for_children

    parent = _claimed(store, queued, "w1")
    child = AgentRun.objects.create(
        conversation_id=parent.conversation_id,
        trigger_message_id=parent.trigger_message_id,
        parent_run=parent,
        parent_call_id="call-1",
        task="Look it up",
        depth=1,
    )
    assert run_wait_for_children(run=parent, call_ids=["call-1"], worker_id="w1")
    held = _claimed(store, child, "w2")

    def end() -> object:
        if ending == "finish":
            return store.finish(run=held, step=FinalAnswerStep(text="42"), worker_id="w2")
        if ending == "finish_on_loop":
            return run_on_process_loop(
                store.afinish(run=held, step=FinalAnswerStep(text="42"), worker_id="w2")
            )
        if ending == "fail":
            return store.fail(run=held, code="run_timeout", message="Too long.", worker_id="w2")
        return store.cancel(run=held, worker_id="w2")

    end()
    woken = AgentRun.objects.get(pk=parent.pk)
    assert (woken.status, woken.resumes, woken.worker_id) == (AgentRun.Status.QUEUED, 1, "")
    # A child writes no message; its end, tried again, writes nothing and wakes nobody.
    assert not Message.objects.filter(run=held).exists()
    assert not end()
    assert AgentRun.objects.get(pk=parent.pk).resumes == 1
    # The parent is claimed again like any queued run.
    assert _claimed(store, woken, "w3").worker_id == "w3"
