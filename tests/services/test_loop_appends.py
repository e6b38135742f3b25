"""agents/loop_db.py: the run driver's fenced appends, sent from the process's event loop on
its own PostgreSQL connections: the same rows, commits and group messages as through the
database threads (tests/services/test_runs.py)."""

from __future__ import annotations

import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from agents import events, loop_db
from agents.models import AgentRun, ModelCall
from agents.process_loop import run_on_process_loop
from agents.react.types import ActionStep, ModelCallRecord, ThoughtStep, step_from_event
from agents.services.runs import (
    RunLost,
    run_claim,
    run_prior_steps,
    run_record_steps_on_loop,
)
from tests.group import GroupListener
from tests.services.test_runs import _call, committed_run  # noqa: F401 (a fixture)

# The loop's connections see only what is committed: every test here commits for real.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("the loop's own connections are PostgreSQL's; SQLite writes on threads")


def record_on_loop(run: AgentRun, steps, worker_id: str = "w1"):
    return run_on_process_loop(run_record_steps_on_loop(run=run, steps=steps, worker_id=worker_id))


def test_one_reply_is_one_commit_and_one_group_message(committed_run):  # noqa: F811
    run = committed_run
    listener = GroupListener(run.conversation_id)
    thought = ThoughtStep(text="I should add.")
    action = ActionStep(tool="calculator", tool_input={"expression": "2+2"}, call_id="c1")

    stored = record_on_loop(run, [_call("Thought: ...", 11, 4), thought, action])
    assert events.publish_flush()

    assert [e.seq for e in stored] == [2, 3]  # message.created was 1; the call is not an event
    assert [step_from_event(e.payload) for e in stored] == [thought, action]
    assert all(e.created_at.utcoffset() == timedelta(0) for e in stored)
    assert ModelCall.objects.get(run=run).response_text == "Thought: ..."
    assert (run.prompt_tokens, run.completion_tokens) == (11, 4)
    assert run.conversation.last_seq == 3
    assert [e.seq for e in run.events.order_by("seq")] == [1, 2, 3]
    received = listener.received()
    assert [[f["seq"] for f in m["frames"]] for m in received] == [[2, 3]]
    assert received[0]["frames"][0]["text"] == "I should add."


def test_calls_and_steps_are_stored_exactly_as_given(committed_run):  # noqa: F811
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

    record_on_loop(run, [call, thought])

    stored = ModelCall.objects.get(run=run)
    assert stored.request_messages == call.messages
    assert stored.request_options == call.options
    assert stored.response_tool_calls == call.tool_calls
    assert (stored.response_text, stored.prompt_tokens, stored.duration_ms) == (tricky, 7, 12)
    assert run_prior_steps(run=run)[-1] == thought


def test_a_worker_that_lost_the_run_stores_and_sends_nothing(committed_run, settings):  # noqa: F811
    run = old = committed_run
    stale = timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_STALE_SECONDS + 1)
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=stale)
    run_claim(run_id=run.pk, worker_id="w2")
    listener = GroupListener(run.conversation_id)

    with pytest.raises(RunLost):
        record_on_loop(old, [_call("late", 5, 5), ThoughtStep(text="late")], worker_id="w1")
    assert events.publish_flush()

    assert not ModelCall.objects.filter(run=run).exists()
    assert list(run.events.values_list("type", flat=True)) == ["message.created"]
    run.refresh_from_db()
    assert (run.prompt_tokens, run.completion_tokens) == (0, 0)
    assert listener.received() == []


def test_a_connection_whose_backend_ended_while_idle_is_replaced():
    def backend_pid() -> int:
        rows = run_on_process_loop(loop_db.fetch_all("SELECT pg_backend_pid()", {}))
        return rows[0][0]

    first = backend_pid()
    params = connection.get_connection_params()
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [first])
        for _ in range(500):
            if not admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s", [first]
            ).fetchone():
                break
            time.sleep(0.01)

    assert backend_pid() != first


def test_the_loop_writes_only_on_postgresql_and_when_enabled(settings):
    assert loop_db.available()
    settings.AGENT_LOOP_DATABASE_CONNECTIONS = 0
    assert not loop_db.available()
