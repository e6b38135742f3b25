"""The event log and a run's lifecycle, against the real database and channel layer."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agents import events, protocol
from agents.db.statements import fenced_statements_supported
from agents.models import AgentRun, Conversation, Message, ModelCall, ToolConfig
from agents.profile_snapshot import ProfileSnapshot
from agents.react.types import (
    ActionStep,
    FinalAnswerStep,
    ModelCallRecord,
    ObservationStep,
    ThoughtStep,
    step_from_event,
)
from agents.runs.log import event_append
from agents.runs.reads import run_claim_refusal, run_prior_steps, run_stored_steps
from agents.runs.store import (
    RunLost,
    run_claim,
    run_claim_with_tools,
    run_fail,
    run_finish,
    run_heartbeat,
    run_mark_cancelled,
    run_record_model_call,
    run_record_step,
    run_record_steps,
    run_started,
    run_store,
    runs_cancel_requested,
    runs_needing_rescue,
)
from agents.runtime import snapshot_tool_configs
from agents.selectors import events_after
from agents.services.conversations import conversation_create, message_send
from chatsite.server.loop import run_on_process_loop
from tests.group import GroupListener


@pytest.fixture
def queued_run(conversation, user) -> AgentRun:
    return message_send(conversation=conversation, user=user, content="What is 2+2?").run


def test_claim_takes_a_queued_run_once(queued_run):
    run = run_claim(run_id=queued_run.pk, worker_id="w1")

    assert run.status == AgentRun.Status.RUNNING
    assert (run.attempts, run.worker_id) == (1, "w1")
    assert run.started_at is not None
    assert run_claim(run_id=queued_run.pk, worker_id="w2") is None


def test_the_claim_reads_what_the_run_starts_with(queued_run, django_assert_num_queries):
    # PostgreSQL: one statement; SQLite: the UPDATE, then the run and its rows.
    statements = 1 if connection.vendor == "postgresql" else 2
    with django_assert_num_queries(statements):
        run = run_claim(run_id=queued_run.pk, worker_id="w1")
        owner, question = run.conversation.owner, run.trigger_message
        version, endpoint = run.profile_version, run.model_config

    assert (owner.pk, question.pk) == (
        queued_run.conversation.owner_id,
        queued_run.trigger_message_id,
    )
    assert version is not None
    assert version.pk == queued_run.profile_version_id
    assert endpoint is not None
    assert endpoint.pk == version.snapshot["model_config_id"]


def test_the_claimed_run_and_its_rows_are_what_the_orm_reads(queued_run):
    """Every field, converted as the ORM converts it (the snapshot's JSON, the dates)."""
    run = run_claim(run_id=queued_run.pk, worker_id="w1")
    fresh = AgentRun.objects.select_related(
        "conversation__owner", "trigger_message", "profile_version", "model_config"
    ).get(pk=queued_run.pk)

    pairs = [
        (run, fresh),
        (run.conversation, fresh.conversation),
        (run.conversation.owner, fresh.conversation.owner),
        (run.trigger_message, fresh.trigger_message),
        (run.profile_version, fresh.profile_version),
        (run.model_config, fresh.model_config),
    ]
    for claimed, read in pairs:
        assert type(claimed) is type(read)
        for field in read._meta.concrete_fields:
            assert getattr(claimed, field.attname) == getattr(read, field.attname), field
    assert run.status == AgentRun.Status.RUNNING
    assert (run.worker_id, run.attempts) == ("w1", 1)


def _tool(name: str, *, enabled: bool = True) -> ToolConfig:
    return ToolConfig.objects.create(
        name=name, kind="calculator", description=name, enabled=enabled, config={"n": name}
    )


def test_on_postgresql_the_claim_reads_the_enabled_tools_of_its_version(
    conversation, user, default_profile, django_assert_num_queries
):
    default_profile.tools.set([_tool("zeta"), _tool("alpha"), _tool("off", enabled=False)])
    run = message_send(conversation=conversation, user=user, content="Tools?").run
    fresh = {
        tool.pk: tool
        for tool in ToolConfig.objects.filter(enabled=True, name__in=["zeta", "alpha"])
    }

    statements = 1 if connection.vendor == "postgresql" else 2
    with django_assert_num_queries(statements):
        claim = run_claim_with_tools(run_id=run.pk, worker_id="w1", announce=True)

    assert claim.run.pk == run.pk
    if connection.vendor != "postgresql":
        assert claim.tool_configs is None  # read by the executor's builder instead
        return
    assert sorted(tool.pk for tool in claim.tool_configs) == sorted(fresh)
    for claimed in claim.tool_configs:
        for field in ToolConfig._meta.concrete_fields:
            assert getattr(claimed, field.attname) == getattr(fresh[claimed.pk], field.attname)
    # Ordered as the snapshot lists them, without another statement.
    snapshot = ProfileSnapshot.from_version(claim.run.profile_version)
    with django_assert_num_queries(0):
        ordered = snapshot_tool_configs(snapshot, enabled=claim.tool_configs)
    assert [tool.name for tool in ordered] == ["alpha", "zeta"]


@pytest.mark.parametrize("tool_ids", [[], "not a list", ["7x", None, {"id": 1}]])
def test_a_claimed_run_whose_version_names_no_usable_tools_has_none(queued_run, tool_ids):
    version = queued_run.profile_version
    version.snapshot = {**version.snapshot, "tool_ids": tool_ids}
    version.save(update_fields=["snapshot"])
    _tool("calc")

    claim = run_claim_with_tools(run_id=queued_run.pk, worker_id="w1", announce=False)

    assert claim.run.status == AgentRun.Status.RUNNING
    assert claim.tool_configs == ([] if connection.vendor == "postgresql" else None)


def test_a_claimed_run_without_an_endpoint_or_a_version_reads_none(queued_run):
    AgentRun.objects.filter(pk=queued_run.pk).update(model_config=None, profile_version=None)

    run = run_claim(run_id=queued_run.pk, worker_id="w1")

    assert run.model_config is None
    assert run.profile_version is None


def test_a_refused_claim_says_why_in_the_words_of_the_run_as_it_is(queued_run):
    run_claim(run_id=queued_run.pk, worker_id="w1")

    assert run_claim(run_id=queued_run.pk, worker_id="w2") is None
    assert run_claim_refusal(run_id=queued_run.pk) == (
        "status running, holder w1, heartbeat fresh, attempts 1"
    )
    assert run_claim_refusal(run_id=queued_run.pk + 1000) == (
        "no such run (deleted, or not committed yet)"
    )


def test_a_stale_heartbeat_lets_another_worker_take_over(queued_run, settings):
    run_claim(run_id=queued_run.pk, worker_id="w1")
    stale = timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_STALE_SECONDS + 1)
    AgentRun.objects.filter(pk=queued_run.pk).update(heartbeat_at=stale)

    assert runs_needing_rescue(queued_for_seconds=60) == [queued_run.pk]
    run = run_claim(run_id=queued_run.pk, worker_id="w2")

    assert (run.attempts, run.worker_id) == (2, "w2")
    # The first worker has lost it: its heartbeat no longer touches the run.
    assert run_heartbeat(run_ids=[queued_run.pk], worker_id="w1") == set()
    assert run_heartbeat(run_ids=[queued_run.pk], worker_id="w2") == {queued_run.pk}


def test_the_heartbeat_moves_only_for_runs_the_worker_holds(queued_run, conversation, user):
    run_claim(run_id=queued_run.pk, worker_id="w1")
    before = AgentRun.objects.get(pk=queued_run.pk).heartbeat_at
    second = conversation_create(owner=user, profile=conversation.profile)
    other = message_send(conversation=second, user=user, content="again").run
    unknown = other.pk + 1000

    assert run_heartbeat(run_ids=[queued_run.pk, other.pk, unknown], worker_id="w1") == {
        queued_run.pk
    }
    assert AgentRun.objects.get(pk=queued_run.pk).heartbeat_at > before
    assert AgentRun.objects.get(pk=other.pk).heartbeat_at is None


def test_cancel_requests_are_found_among_the_runs_asked_about(queued_run, conversation, user):
    second = conversation_create(owner=user, profile=conversation.profile)
    other = message_send(conversation=second, user=user, content="again").run
    AgentRun.objects.filter(pk=other.pk).update(cancel_requested_at=timezone.now())

    assert runs_cancel_requested(run_ids=[queued_run.pk, other.pk]) == {other.pk}
    assert runs_cancel_requested(run_ids=[queued_run.pk]) == set()
    assert runs_cancel_requested(run_ids=[]) == set()


def test_a_queued_run_left_too_long_needs_rescue(queued_run):
    assert runs_needing_rescue(queued_for_seconds=60) == []
    AgentRun.objects.filter(pk=queued_run.pk).update(
        created_at=timezone.now() - timedelta(seconds=120)
    )
    assert runs_needing_rescue(queued_for_seconds=60) == [queued_run.pk]


def test_a_finished_run_cannot_be_claimed(queued_run):
    run = run_claim(run_id=queued_run.pk, worker_id="w1")
    run_fail(run=run, code="model_auth", message="The model rejected the API key.")
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=None)

    assert run_claim(run_id=queued_run.pk, worker_id="w2") is None


def test_steps_are_stored_in_order_and_read_back_for_resuming(queued_run):
    run = run_claim(run_id=queued_run.pk, worker_id="w1")
    run_started(run=run, model="m", profile="assistant")
    steps = [
        ThoughtStep(text="I should add.", prompt_tokens=10, completion_tokens=5),
        ActionStep(tool="calculator", tool_input="2+2", call_id="c1"),
        ObservationStep(tool="calculator", call_id="c1", text="4"),
    ]
    for step in steps:
        run_record_step(run=run, step=step)

    assert [step_from_event(p) for p in run_stored_steps(run=run)] == steps
    stored = events_after(conversation=run.conversation, after_seq=0)
    frames = [protocol.event_frame(e) for e in stored]
    assert [f["seq"] for f in frames] == [1, 2, 3, 4, 5]
    assert [f["type"] for f in frames] == ["message.created", "run.started", "step", "step", "step"]
    assert frames[1]["attempt"] == 1
    assert frames[3]["kind"] == "action"
    assert (frames[3]["tool"], frames[3]["tool_input"]) == ("calculator", "2+2")
    assert all(f["run_id"] == run.pk and f["ts"] for f in frames)


def test_model_calls_are_rows_not_events_and_add_up_tokens(queued_run):
    run = run_claim(run_id=queued_run.pk, worker_id="w1")
    record = ModelCallRecord(
        index=0,
        messages=[{"role": "user", "content": "hi"}],
        options={"stop": ["Observation:"]},
        response_text="Thought: hm",
        prompt_tokens=30,
        completion_tokens=7,
    )
    run_record_model_call(run=run, record=record)
    # A resumed attempt numbers from zero again; the rows keep counting.
    run_record_model_call(run=run, record=record)

    assert list(ModelCall.objects.filter(run=run).values_list("index", flat=True)) == [0, 1]
    run.refresh_from_db()
    assert (run.prompt_tokens, run.completion_tokens) == (60, 14)
    assert run.events.count() == 1  # only message.created


def test_finish_saves_the_answer_and_announces_it(queued_run):
    run = run_claim(run_id=queued_run.pk, worker_id="w1")
    run_record_model_call(
        run=run,
        record=ModelCallRecord(
            index=0, messages=[], options={}, response_text="", prompt_tokens=3, completion_tokens=4
        ),
    )

    message = run_finish(run=run, step=FinalAnswerStep(text="It is **4**."))

    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    assert message.role == Message.Role.ASSISTANT
    assert message.run == run
    finished = run.events.get(type="run.finished")
    assert finished.payload["message"]["content"] == "It is **4**."
    assert "<strong>4</strong>" in finished.payload["message"]["html"]
    assert finished.payload["usage"]["prompt_tokens"] == 3
    assert finished.payload["usage"]["completion_tokens"] == 4
    assert finished.payload["stop_reason"] == "answer"


def test_an_ended_run_is_not_ended_twice(queued_run):
    run = run_claim(run_id=queued_run.pk, worker_id="w1")
    assert run_mark_cancelled(run=run, partial_answer="Half an ans")

    assert run_finish(run=run, step=FinalAnswerStep(text="too late")) is None
    assert not run_fail(run=run, code="x", message="y")
    run.refresh_from_db()
    assert run.status == AgentRun.Status.CANCELLED
    assert Message.objects.get(role=Message.Role.ASSISTANT).content == "Half an ans"
    cancelled = run.events.get(type="run.cancelled")
    assert cancelled.payload["partial_answer"] == "Half an ans"
    assert list(run.events.values_list("type", flat=True)) == ["message.created", "run.cancelled"]


def test_fail_records_a_visible_error(queued_run):
    run = run_claim(run_id=queued_run.pk, worker_id="w1")

    assert run_fail(run=run, code="model_timeout", message="The model did not answer in time.")

    run.refresh_from_db()
    assert (run.status, run.error_code) == (AgentRun.Status.FAILED, "model_timeout")
    failed = run.events.get(type="run.failed")
    assert failed.payload == {
        "code": "model_timeout",
        "message": "The model did not answer in time.",
    }
    assert not Message.objects.filter(role=Message.Role.ASSISTANT).exists()


@pytest.mark.django_db(transaction=True)
def test_seq_has_no_gaps_or_repeats_under_concurrent_appends(user, default_profile):
    conversation = conversation_create(owner=user)
    writers, per_writer = 8, 15
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def append_many(n: int) -> None:
        try:
            start.wait()
            for i in range(per_writer):
                event_append(
                    conversation=conversation, run=None, type="step", payload={"w": n, "i": i}
                )
        except BaseException as error:  # surfaced below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=append_many, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    seqs = list(events_after(conversation=conversation, after_seq=0).values_list("seq", flat=True))
    assert seqs == list(range(1, writers * per_writer + 1))
    conversation.refresh_from_db()
    assert conversation.last_seq == writers * per_writer
    # Each writer's own events keep their order.
    for n in range(writers):
        mine = events_after(conversation=conversation, after_seq=0).filter(payload__w=n)
        assert [e.payload["i"] for e in mine] == list(range(per_writer))


@pytest.mark.django_db(transaction=True)
def test_events_reach_the_group_only_after_commit(user, default_profile):
    conversation = conversation_create(owner=user)
    listener = GroupListener(conversation.pk)

    with transaction.atomic():
        stored = event_append(conversation=conversation, run=None, type="step", payload={"n": 1})
        # Sent before the commit: if the stored event went out early it would arrive first.
        events.publish_ephemeral(conversation.pk, {"type": "answer.delta", "text": "marker"})
        assert events.publish_flush()
    assert events.publish_flush()

    with transaction.atomic():
        event_append(conversation=conversation, run=None, type="step", payload={"n": 2})
        transaction.set_rollback(True)
    assert events.publish_flush()

    received = listener.received()
    assert [m["type"] for m in received] == ["chat.event", "chat.event"]
    assert [m["frames"] for m in received] == [
        [{"type": "answer.delta", "text": "marker"}],
        [protocol.event_frame(stored)],
    ]


def test_prior_steps_give_a_resumed_attempt_its_calls_and_steps(queued_run):
    run = run_claim(run_id=queued_run.pk, worker_id="w1")
    call = ModelCallRecord(
        index=0, messages=[{"role": "user", "content": "q"}], options={}, response_text="t",
        prompt_tokens=5, completion_tokens=2,
    )  # fmt: skip
    run_record_model_call(run=run, record=call)
    action = ActionStep(tool="calculator", tool_input="2+2", call_id="c1")
    observation = ObservationStep(tool="calculator", call_id="c1", text="4")
    run_record_step(run=run, step=action)
    run_record_step(run=run, step=observation)

    prior = run_prior_steps(run=run)

    assert prior[1:] == [action, observation]
    assert isinstance(prior[0], ModelCallRecord)
    assert (prior[0].prompt_tokens, prior[0].completion_tokens) == (5, 2)


def test_after_a_takeover_the_old_holder_can_write_nothing(queued_run, settings):
    old = run_claim(run_id=queued_run.pk, worker_id="w1")
    stale = timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_STALE_SECONDS + 1)
    AgentRun.objects.filter(pk=queued_run.pk).update(heartbeat_at=stale)
    new = run_claim(run_id=queued_run.pk, worker_id="w2")
    record = ModelCallRecord(index=0, messages=[], options={}, response_text="late")

    with pytest.raises(RunLost):
        run_record_step(run=old, step=ThoughtStep(text="late"), worker_id="w1")
    with pytest.raises(RunLost):
        run_record_model_call(run=old, record=record, worker_id="w1")
    with pytest.raises(RunLost):
        run_started(run=old, model="m", profile="p", worker_id="w1")
    assert run_finish(run=old, step=FinalAnswerStep(text="late"), worker_id="w1") is None
    assert not run_fail(run=old, code="x", message="late", worker_id="w1")
    assert not run_mark_cancelled(run=old, partial_answer="late", worker_id="w1")

    run_record_step(run=new, step=ThoughtStep(text="mine"), worker_id="w2")
    assert run_finish(run=new, step=FinalAnswerStep(text="done"), worker_id="w2") is not None
    types = list(new.events.order_by("seq").values_list("type", flat=True))
    assert types == ["message.created", "step", "run.finished"]
    assert not ModelCall.objects.filter(run=new).exists()


def _call(response_text: str, prompt_tokens: int, completion_tokens: int) -> ModelCallRecord:
    return ModelCallRecord(
        index=0,
        messages=[{"role": "user", "content": "q"}],
        options={},
        response_text=response_text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


@pytest.fixture
def committed_run(user, default_profile) -> AgentRun:
    """A run claimed by worker ``w1``, in a test whose transactions really commit."""
    run = message_send(conversation=conversation_create(owner=user), user=user, content="q").run
    return run_claim(run_id=run.pk, worker_id="w1")


def _taken_over_by_w2(run: AgentRun, settings) -> GroupListener:
    """``run``'s heartbeat goes stale and worker ``w2`` claims it; a listener on its group."""
    stale = timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_STALE_SECONDS + 1)
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=stale)
    run_claim(run_id=run.pk, worker_id="w2")
    return GroupListener(run.conversation_id)


def _record_steps_on_loop(*, run: AgentRun, steps, worker_id: str):
    return run_on_process_loop(run_store().arecord(run=run, steps=steps, worker_id=worker_id))


def _started_on_loop(*, run: AgentRun, model: str, profile: str, worker_id: str):
    return run_on_process_loop(
        run_store().astart(run=run, model=model, profile=profile, worker_id=worker_id)
    )


def _threads_or_loop(request, on_threads, on_loop):
    if request.param == "threads":
        return on_threads
    if not fenced_statements_supported():
        pytest.skip("the loop's own connections send the PostgreSQL store's statements")
    return on_loop


@pytest.fixture(params=["threads", "loop"])
def record_steps(request):
    """The worker's two ways to store a reply's steps: through a database thread (Django's
    connection), or from the event loop on its own connections (chatsite/server/db/loop_pool.py)."""
    return _threads_or_loop(request, run_record_steps, _record_steps_on_loop)


@pytest.fixture(params=["threads", "loop"])
def record_started(request):
    """The same two ways for the announcement of an attempt."""
    return _threads_or_loop(request, run_started, _started_on_loop)


@pytest.mark.django_db(transaction=True)
def test_a_claim_that_announces_stores_and_publishes_run_started_in_its_statement(
    user, default_profile, django_assert_num_queries
):
    queued = message_send(conversation=conversation_create(owner=user), user=user, content="q")
    run = queued.run
    assert events.publish_flush()
    listener = GroupListener(run.conversation_id)
    last_seq = Conversation.objects.get(pk=run.conversation_id).last_seq

    statements = 1 if connection.vendor == "postgresql" else 2
    with django_assert_num_queries(statements):
        claim = run_claim_with_tools(run_id=run.pk, worker_id="w1", announce=True)
    assert events.publish_flush()

    if connection.vendor != "postgresql":
        assert claim.started is None  # run_execute announces it from the run driver
        assert listener.received() == []
        return
    started = claim.started
    # What run_started would have stored: the same payload, the next seq.
    assert started.payload == protocol.run_started_payload(
        attempt=1,
        model=run.model_name,
        profile=ProfileSnapshot.from_version(claim.run.profile_version).slug,
        trigger_message_id=run.trigger_message_id,
    )
    assert (started.type, started.seq, started.run_id) == ("run.started", last_seq + 1, run.pk)
    stored = run.events.get(type="run.started")
    assert (stored.pk, stored.seq, stored.payload) == (started.pk, started.seq, started.payload)
    assert stored.created_at == started.created_at
    assert claim.run.conversation.last_seq == last_seq + 1
    assert Conversation.objects.get(pk=run.conversation_id).last_seq == last_seq + 1
    # Live as a replay would send it.
    frames = [frame for message in listener.received() for frame in message["frames"]]
    assert frames == [protocol.event_frame(stored)]


@pytest.mark.parametrize(
    ("attempts", "resumes", "announced"),
    [(0, 0, True), ("max", 0, False), ("max", 1, True)],
)
def test_a_claim_announces_no_attempt_that_run_execute_fails_at_once(
    queued_run, settings, attempts, resumes, announced
):
    attempts = settings.AGENT_MAX_ATTEMPTS if attempts == "max" else attempts
    AgentRun.objects.filter(pk=queued_run.pk).update(attempts=attempts, resumes=resumes)
    last_seq = Conversation.objects.get(pk=queued_run.conversation_id).last_seq

    claim = run_claim_with_tools(run_id=queued_run.pk, worker_id="w1", announce=True)

    announced = announced and connection.vendor == "postgresql"
    assert (claim.started is not None) == announced
    assert queued_run.events.filter(type="run.started").count() == int(announced)
    assert Conversation.objects.get(pk=queued_run.conversation_id).last_seq == last_seq + int(
        announced
    )


def test_a_claim_announces_nothing_for_a_run_without_a_version_or_when_not_asked(queued_run):
    last_seq = Conversation.objects.get(pk=queued_run.conversation_id).last_seq
    assert (
        run_claim_with_tools(run_id=queued_run.pk, worker_id="w1", announce=False).started is None
    )
    AgentRun.objects.filter(pk=queued_run.pk).update(
        profile_version=None, worker_id="", heartbeat_at=None
    )

    claim = run_claim_with_tools(run_id=queued_run.pk, worker_id="w2", announce=True)

    assert claim.run.worker_id == "w2"
    assert claim.started is None
    assert not queued_run.events.filter(type="run.started").exists()
    assert Conversation.objects.get(pk=queued_run.conversation_id).last_seq == last_seq


@pytest.mark.django_db(transaction=True)
def test_an_attempt_is_announced_once_with_its_number(committed_run, record_started):
    run = committed_run
    listener = GroupListener(run.conversation_id)

    started = record_started(run=run, model="m", profile="assistant", worker_id="w1")
    assert events.publish_flush()

    assert (started.seq, started.type) == (2, "run.started")
    assert started.payload == {
        "attempt": 1,
        "model": "m",
        "profile": "assistant",
        "trigger_message_id": run.trigger_message_id,
    }
    stored = run.events.get(seq=2)
    assert (stored.type, stored.payload) == ("run.started", started.payload)
    assert [[f["type"] for f in m["frames"]] for m in listener.received()] == [["run.started"]]


@pytest.mark.django_db(transaction=True)
def test_an_attempt_of_a_worker_that_lost_the_run_is_not_announced(
    committed_run, settings, record_started
):
    run = old = committed_run
    listener = _taken_over_by_w2(run, settings)

    with pytest.raises(RunLost):
        record_started(run=old, model="m", profile="p", worker_id="w1")
    assert events.publish_flush()

    assert list(run.events.values_list("type", flat=True)) == ["message.created"]
    assert listener.received() == []


@pytest.mark.django_db(transaction=True)
def test_a_fenced_write_stores_calls_and_steps_exactly_as_given(committed_run, record_steps):
    """Quotes, backslashes, newlines, non-Latin text and emoji survive the one JSON document
    the calls and events travel in."""
    run = committed_run
    tricky = 'He said "2\\3" \n\t{x} \\u0041 — 你好 🧮\r\nend'
    call = ModelCallRecord(
        index=0,
        messages=[{"role": "user", "content": tricky, "name": None}],
        options={"temperature": 0.25, "stop": ["\nObservation:"]},
        response_text=tricky,
        tool_calls=[{"id": "c1", "arguments": '{"a": "\\""}'}],
        prompt_tokens=7,
        completion_tokens=3,
        duration_ms=12,
        error="",
    )
    thought = ThoughtStep(text=tricky)

    record_steps(run=run, steps=[call, thought], worker_id="w1")

    stored = ModelCall.objects.get(run=run)
    assert stored.request_messages == call.messages
    assert stored.request_options == call.options
    assert stored.response_text == tricky
    assert stored.response_tool_calls == call.tool_calls
    assert (stored.prompt_tokens, stored.completion_tokens, stored.duration_ms) == (7, 3, 12)
    assert run_prior_steps(run=run)[-1] == thought


@pytest.mark.django_db(transaction=True)
def test_one_reply_is_one_commit_and_one_group_message(committed_run, record_steps):
    run = committed_run
    listener = GroupListener(run.conversation_id)
    thought = ThoughtStep(text="I should add.")
    action = ActionStep(tool="calculator", tool_input={"expression": "2+2"}, call_id="c1")

    stored = record_steps(
        run=run, steps=[_call("Thought: ...", 11, 4), thought, action], worker_id="w1"
    )
    assert events.publish_flush()

    assert [e.seq for e in stored] == [2, 3]  # message.created was 1; the call is not an event
    assert [step_from_event(e.payload) for e in stored] == [thought, action]
    assert all(e.created_at.utcoffset() == timedelta(0) for e in stored)
    assert [e.seq for e in run.events.order_by("seq")] == [1, 2, 3]
    assert run.conversation.last_seq == 3
    assert ModelCall.objects.get(run=run).response_text == "Thought: ..."
    assert (run.prompt_tokens, run.completion_tokens) == (11, 4)
    received = listener.received()
    assert [[f["seq"] for f in m["frames"]] for m in received] == [[2, 3]]


def _finish_on_loop(*, run: AgentRun, step, worker_id: str, preceding=()):
    return run_on_process_loop(
        run_store().afinish(run=run, step=step, worker_id=worker_id, preceding=preceding)
    )


@pytest.fixture(params=["threads", "loop"])
def finish(request):
    """The same two ways for the run's end."""
    return _threads_or_loop(request, run_finish, _finish_on_loop)


@pytest.mark.django_db(transaction=True)
def test_the_last_reply_and_the_end_of_the_run_are_one_commit(committed_run, finish):
    run = committed_run
    listener = GroupListener(run.conversation_id)
    thought = ThoughtStep(text="I have it.")
    record_steps = run_record_steps if finish is run_finish else _record_steps_on_loop
    record_steps(run=run, steps=[_call("Thought: add", 5, 1), thought], worker_id="w1")

    message = finish(
        run=run,
        step=FinalAnswerStep(text="It is **4**."),
        worker_id="w1",
        preceding=[_call("Final Answer: 4", 20, 3), thought],
    )
    assert events.publish_flush()

    stored = Message.objects.get(pk=message.pk)
    assert (stored.content, stored.role, stored.parent_id) == (
        "It is **4**.",
        "assistant",
        run.trigger_message_id,
    )
    assert stored.on_active_branch
    assert message.on_active_branch
    assert message.created_at == stored.created_at
    run.conversation.refresh_from_db()
    assert run.conversation.active_leaf_id == message.pk
    assert ModelCall.objects.filter(run=run).count() == 2
    finished = run.events.get(type="run.finished")
    assert finished.payload["message"]["id"] == message.pk
    assert finished.payload["message"]["html"].strip() == "<p>It is <strong>4</strong>.</p>"
    assert finished.payload["message"]["created_at"] == stored.created_at.isoformat()
    assert finished.payload["usage"]["prompt_tokens"] == 25
    assert finished.payload["usage"]["completion_tokens"] == 4
    ended = AgentRun.objects.get(pk=run.pk)
    assert (ended.status, ended.heartbeat_at, ended.prompt_tokens) == ("succeeded", None, 25)
    duration_ms = int((ended.finished_at - ended.started_at).total_seconds() * 1000)
    assert finished.payload["usage"]["duration_ms"] == duration_ms
    assert [e.seq for e in run.events.order_by("seq")] == [1, 2, 3, 4]
    assert run.conversation.last_seq == 4
    received = listener.received()
    assert [[f["type"] for f in m["frames"]] for m in received][-1] == ["step", "run.finished"]
    frames = received[-1]["frames"]
    assert frames[0]["text"] == "I have it."
    assert frames[1]["message"] == finished.payload["message"]


@pytest.mark.django_db(transaction=True)
def test_an_answer_to_a_question_the_owner_left_waits_as_a_version(committed_run, finish):
    run = committed_run
    other = Message.objects.create(conversation_id=run.conversation_id, role="user", content="b")
    Conversation.objects.filter(pk=run.conversation_id).update(active_leaf_id=other.pk)

    message = finish(run=run, step=FinalAnswerStep(text="a"), worker_id="w1")

    assert not message.on_active_branch
    assert not Message.objects.get(pk=message.pk).on_active_branch
    assert Conversation.objects.get(pk=run.conversation_id).active_leaf_id == other.pk


@pytest.mark.django_db(transaction=True)
def test_an_end_from_a_worker_that_lost_the_run_writes_and_sends_nothing(
    committed_run, settings, finish
):
    run = old = committed_run
    listener = _taken_over_by_w2(run, settings)

    assert finish(run=old, step=FinalAnswerStep(text="late"), worker_id="w1") is None
    assert events.publish_flush()

    assert not Message.objects.filter(run=run, role="assistant").exists()
    assert list(run.events.values_list("type", flat=True)) == ["message.created"]
    assert AgentRun.objects.get(pk=run.pk).status == "running"
    assert listener.received() == []


@pytest.mark.django_db(transaction=True)
def test_a_batch_from_a_worker_that_lost_the_run_stores_and_sends_nothing(
    committed_run, settings, record_steps
):
    run = old = committed_run
    listener = _taken_over_by_w2(run, settings)

    with pytest.raises(RunLost):
        record_steps(run=old, steps=[_call("late", 5, 5), ThoughtStep(text="late")], worker_id="w1")
    assert events.publish_flush()

    assert not ModelCall.objects.filter(run=run).exists()
    assert list(run.events.values_list("type", flat=True)) == ["message.created"]
    run.refresh_from_db()
    assert (run.prompt_tokens, run.completion_tokens) == (0, 0)
    assert listener.received() == []
