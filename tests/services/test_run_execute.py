"""``run_execute`` called in this process against the scripted model: the paths a live worker
rarely shows (model failures, a run someone else holds, resuming from stored steps)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.llm.scripted import Fail, Hang, Reply
from agents.models import AgentProfile, AgentRun, ModelCall, ModelConfig, ToolConfig
from agents.react.types import ActionStep, ObservationStep, ThoughtStep
from agents.runs.store import run_claim, run_record_step, run_store
from agents.services.conversations import conversation_create
from tests.driving import run_execute
from tests.group import GroupListener

pytestmark = pytest.mark.django_db(transaction=True)

FINAL = "Thought: I have it.\nFinal Answer: It is 42."


@pytest.fixture
def scripted_profile(scripted_model):
    def make(*replies) -> tuple[AgentProfile, str]:
        name = f"svc-{uuid.uuid4().hex[:8]}"
        scripted_model.script(name, list(replies))
        config = ModelConfig.objects.create(
            name=name, base_url=scripted_model.base_url, model=name, max_retries=0
        )
        profile = AgentProfile.objects.create(name=name, slug=name, model_config=config)
        profile.tools.set(ToolConfig.objects.filter(name="calculator"))
        return profile, name

    return make


def _queued_run(user, profile) -> AgentRun:
    """A queued run whose task is not enqueued: this test runs it itself."""
    from agents.models import Message
    from agents.services.prompt_versions import prompt_version_ensure

    conversation = conversation_create(owner=user, profile=profile)
    message = Message.objects.create(conversation=conversation, role="user", content="6*7?")
    return AgentRun.objects.create(
        conversation=conversation,
        trigger_message=message,
        profile_version=prompt_version_ensure(profile=profile),
        model_config=profile.model_config,
        model_name=profile.model_config.model,
    )


def _assert_succeeded_on_the_second_attempt_with_one_call(run: AgentRun) -> None:
    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    assert run.attempts == 2
    kinds = [e.payload.get("kind") for e in run.events.order_by("seq") if e.type == "step"]
    assert kinds.count("action") == 1
    assert kinds.count("observation") == 1


def _types(run: AgentRun) -> list[str]:
    return list(run.events.order_by("seq").values_list("type", flat=True))


def test_a_rejected_api_key_fails_the_run_with_its_code(user, scripted_profile):
    profile, _ = scripted_profile(Fail(401))
    run = _queued_run(user, profile)

    run_execute(run.pk)

    run.refresh_from_db()
    assert run.status == AgentRun.Status.FAILED
    assert run.error_code == "model_auth"
    failed = run.events.get(type="run.failed")
    assert failed.payload["code"] == "model_auth"
    assert failed.payload["message"]
    assert _types(run) == ["run.started", "run.failed"]
    # The failed call is kept for the inspector, though no step followed it.
    [call] = ModelCall.objects.filter(run=run)
    assert "401" in call.error or "Authentication" in call.error


def test_a_run_held_by_a_live_worker_is_left_alone(user, scripted_profile, scripted_model):
    profile, model = scripted_profile(Reply(FINAL))
    run = _queued_run(user, profile)
    run_claim(run_id=run.pk, worker_id="another-host:1")

    run_execute(run.pk)

    run.refresh_from_db()
    assert (run.status, run.worker_id, run.attempts) == ("running", "another-host:1", 1)
    assert run.events.count() == 0
    assert scripted_model.requests(model) == []


def test_a_finished_run_is_not_run_again(user, scripted_profile, scripted_model):
    profile, model = scripted_profile(Reply(FINAL))
    run = _queued_run(user, profile)
    run_execute(run.pk)
    events_before = _types(run)

    run_execute(run.pk)

    assert _types(run) == events_before
    assert events_before[0] == "run.started"
    assert events_before[-1] == "run.finished"
    assert len(scripted_model.requests(model)) == 1


def test_a_resumed_run_does_not_call_a_tool_again(user, scripted_profile, scripted_model):
    profile, model = scripted_profile(Reply(FINAL))
    run = _queued_run(user, profile)
    # A first attempt got as far as the tool's answer, then its worker died.
    crashed = run_claim(run_id=run.pk, worker_id="dead-host:1")
    for step in (
        ThoughtStep(text="I should multiply."),
        ActionStep(tool="calculator", tool_input="6*7", call_id="call-1"),
        ObservationStep(tool="calculator", call_id="call-1", text="42"),
    ):
        run_record_step(run=crashed, step=step)
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))

    run_execute(run.pk)

    _assert_succeeded_on_the_second_attempt_with_one_call(run)
    [request] = scripted_model.requests(model)
    assert "42" in str(request["messages"])
    assert run.answer.content == "It is 42."
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_write_whose_connection_broke_hands_the_run_back_to_resume(
    user, scripted_profile, monkeypatch
):
    import psycopg

    from agents.services import execution

    action = "Thought: multiply.\nAction: calculator\nAction Input: 6*7"
    profile, _ = scripted_profile(Reply(action), Reply(action), Reply(FINAL))
    run = _queued_run(user, profile)
    store = run_store()
    record_steps = store.arecord
    broken = []

    async def breaks_once(**kwargs):
        if not broken:
            broken.append(True)
            # What a write on a connection that died unseen raises (tests/faults).
            raise psycopg.OperationalError("consuming input failed: server closed the connection")
        return await record_steps(**kwargs)

    enqueued: list[int] = []
    monkeypatch.setattr(store, "arecord", breaks_once)
    monkeypatch.setattr(execution, "run_enqueue_on_commit", lambda run_id: enqueued.append(run_id))

    run_execute(run.pk)

    run.refresh_from_db()
    assert (run.status, run.worker_id, run.heartbeat_at) == (AgentRun.Status.RUNNING, "", None)
    assert run.error_code == ""
    assert enqueued == [run.pk]
    assert _types(run) == ["run.started"]

    run_execute(enqueued[0])  # the task it queued, delivered

    _assert_succeeded_on_the_second_attempt_with_one_call(run)


def test_a_write_that_failed_as_a_statement_fails_the_run_as_before(
    user, scripted_profile, monkeypatch
):
    import psycopg

    profile, _ = scripted_profile(
        Reply("Thought: multiply.\nAction: calculator\nAction Input: 6*7")
    )
    run = _queued_run(user, profile)

    async def times_out(**kwargs):
        raise psycopg.errors.QueryCanceled("canceling statement due to statement timeout")

    monkeypatch.setattr(run_store(), "arecord", times_out)

    run_execute(run.pk)

    run.refresh_from_db()
    assert (run.status, run.error_code) == (AgentRun.Status.FAILED, "internal_error")


def test_only_errors_that_end_the_connection_count_as_a_broken_connection():
    import psycopg
    from django import db

    from agents.services.execution import _connection_broke

    def wrapped(error: Exception) -> Exception:
        # As Django's database wrapper raises it: its own class, psycopg's error as the cause.
        outer = db.OperationalError(str(error))
        outer.__cause__ = error
        return outer

    lost = psycopg.OperationalError("consuming input failed: server closed the connection")
    assert _connection_broke(lost)
    assert _connection_broke(wrapped(lost))
    assert _connection_broke(psycopg.InterfaceError("the connection is closed"))
    assert _connection_broke(psycopg.errors.AdminShutdown("terminating connection"))
    assert _connection_broke(psycopg.errors.ConnectionFailure("connection failure"))
    assert not _connection_broke(psycopg.errors.QueryCanceled("statement timeout"))
    assert not _connection_broke(wrapped(psycopg.errors.DeadlockDetected("deadlock detected")))
    assert not _connection_broke(ValueError("not the database"))


def test_a_cancel_requested_before_the_first_step_stops_the_run(
    user, scripted_profile, scripted_model
):
    profile, model = scripted_profile(Reply(FINAL))
    run = _queued_run(user, profile)
    AgentRun.objects.filter(pk=run.pk).update(cancel_requested_at=timezone.now())

    run_execute(run.pk)

    run.refresh_from_db()
    assert run.status == AgentRun.Status.CANCELLED
    assert _types(run) == ["run.started", "run.cancelled"]
    assert scripted_model.requests(model) == []


def test_a_run_stuck_past_the_hard_limit_is_failed(user, scripted_profile, settings):
    settings.AGENT_RUN_HARD_LIMIT_SECONDS = 1
    profile, _ = scripted_profile(Hang(seconds=10))
    ModelConfig.objects.filter(pk=profile.model_config_id).update(request_timeout_seconds=3)
    run = _queued_run(user, profile)

    run_execute(run.pk)

    run.refresh_from_db()
    assert run.status == AgentRun.Status.FAILED
    assert run.error_code == "run_timeout"
    assert _types(run) == ["run.started", "run.failed"]


def test_deleting_the_conversation_mid_run_stops_the_run_quietly(
    user, scripted_profile, scripted_model
):
    from agents.models import Conversation

    profile, model = scripted_profile()
    run = _queued_run(user, profile)

    def delete_then_answer(body: dict) -> Reply:
        # Another tab deletes the conversation while the model thinks.
        Conversation.objects.filter(pk=run.conversation_id).delete()
        connection.close()  # this is the scripted server's thread
        return Reply(FINAL)

    scripted_model.policy(model, delete_then_answer)

    run_execute(run.pk)  # does not raise

    assert not AgentRun.objects.filter(pk=run.pk).exists()
    assert len(scripted_model.requests(model)) == 1


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_each_reply_reaches_the_browser_as_one_batch(user, scripted_profile):
    profile, _ = scripted_profile(
        Reply("Thought: I should multiply.\nAction: calculator\nAction Input: 6*7"), Reply(FINAL)
    )
    run = _queued_run(user, profile)
    listener = GroupListener(run.conversation_id)

    run_execute(run.pk)

    batches = [
        [frame.get("kind", frame["type"]) for frame in message["frames"]]
        for message in listener.received()
        if message["frames"][0].get("seq") is not None  # answer deltas are not stored events
    ]
    assert batches == [
        ["run.started"],
        ["thought", "action"],
        ["observation"],
        ["thought", "run.finished"],
    ]
    assert ModelCall.objects.filter(run=run).count() == 2
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_runs_queued_under_the_tasks_old_name_still_execute():
    """Messages a broker holds from before the task was named after its service."""
    from agents import tasks
    from agents.runs.queue import RUN_TASK
    from chatsite.celery import app

    assert app.tasks["agents.run_agent"].run is tasks.run_execute.run
    # The name the services queue a run by (agents/runs/queue.py) is the task's.
    assert app.tasks[RUN_TASK].run is tasks.run_execute.run


def test_a_stop_that_comes_after_the_run_ended_leaves_the_threads_next_run_alone(
    user, scripted_profile
):
    from agents.services.execution import _monitor

    # The monitor's heartbeat pass finds a run that ended a moment ago "lost" and stops it:
    # by then the pool thread that drove it may have taken another run.
    with _monitor.watch(run_id=-1) as ended:
        pass
    ended.stop(lost=True)
    profile, _ = scripted_profile(Reply(FINAL))
    run = _queued_run(user, profile)

    run_execute(run.pk)  # on this same thread

    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    assert _types(run)[-1] == "run.finished"


def _reads_of(captured, tables: tuple[str, ...]) -> list[str]:
    """The reads that name one of ``tables``."""
    return [
        query["sql"]
        for query in captured.captured_queries
        if query["sql"].startswith("SELECT")
        and any(f'FROM "{table}"' in query["sql"] for table in tables)
    ]


def test_a_runs_start_reads_its_inputs_once_with_its_claim(user, scripted_profile):
    """The schedule's step budget, the owner's instructions and whether the conversation has
    files are read with the claim (``StartInputs``): in its one statement on PostgreSQL,
    by their selectors in the portable store, and never again while the run is set up."""
    from django.test.utils import CaptureQueriesContext

    from agents.db.statements import fenced_statements_supported
    from agents.models import UserPreference

    profile, _ = scripted_profile(Reply(FINAL))
    UserPreference.objects.create(user=user, custom_instructions="Answer in French.")
    run = _queued_run(user, profile)

    with CaptureQueriesContext(connection) as captured:
        run_execute(run.pk)

    inputs = ("agents_schedulefiring", "agents_userpreference", "agents_attachment")
    each_by_itself = 0 if fenced_statements_supported() else 1
    reads = _reads_of(captured, inputs)
    assert len(reads) == each_by_itself * len(inputs), reads
    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    assert run.user_instructions == "Answer in French."


def test_the_end_of_a_plain_run_reads_nothing_of_the_effects_that_cannot_apply(
    user, scripted_profile
):
    """A run with no schedule, child or evaluation, on a site with no budget: after its end
    one read says so (docs/performance.md#after-run), and only its notification is written."""
    from django.test.utils import CaptureQueriesContext

    from agents.models import Notification
    from agents.services.execution import _run_ended

    profile, _ = scripted_profile(Reply(FINAL))
    run = _queued_run(user, profile)
    run_execute(run.pk)
    Notification.objects.filter(run=run).delete()

    with CaptureQueriesContext(connection) as captured:
        _run_ended(run.pk)

    tables_read_alone = {
        table
        for query in captured.captured_queries
        for table in ("agents_usageentry", "agents_usagebudget", "agents_evalresult")
        if query["sql"].startswith(f'SELECT "{table}"')
    }
    assert tables_read_alone == set()
    # The one read asks about children inside an EXISTS; no statement lists them.
    children_read = [
        query["sql"]
        for query in captured.captured_queries
        if '"parent_run_id" = ' in query["sql"] and "EXISTS" not in query["sql"]
    ]
    assert children_read == []
    # Nor are the run and its firing read again for its notification, nor the owner's
    # unread count, webhooks and e-mail choice (that read has them too): the end is that
    # read and the notification's insert, with no transaction around it (an owner with
    # neither webhook nor e-mail has no deliveries).
    statements = [query["sql"].split(None, 1)[0] for query in captured.captured_queries]
    assert statements == ["SELECT", "INSERT"], captured.captured_queries
    assert Notification.objects.filter(run=run, kind=Notification.Kind.FINISHED).count() == 1
