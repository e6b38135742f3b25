"""Driving agent runs inside a worker process: claim, execute, watch, rescue.

``run_execute`` claims a run (a conditional UPDATE; it returns at once if the run ended or a
live worker holds it), resumes from the steps already stored, and records the steps of each
model reply in one transaction, published after commit (docs/architecture.md). A redelivered
or rescued run therefore continues where it stopped: no tool that returned runs again, no seq
repeats.

One monitor thread per worker process keeps the heartbeats of all the runs the process holds
and polls their ``cancel_requested_at`` every ``AGENT_CANCEL_POLL_SECONDS``; ``should_cancel``
only reads a flag it sets. That is two small queries per interval for the whole process, not
per run (docs/performance.md#run-monitor), and a run waiting on the model holds no database
connection.

The run driver: a Celery task (threads pool, ``CELERY_WORKER_POOL``) claims its run and sets
it up in its own thread, through the ORM; then the run's steps are driven by ``_drive`` on the
process's one event loop (``process_loop()``, where the model calls are made), as a task beside
every other run the process holds, and the task returns: its thread is free for the next
run as soon as this one is on the loop. The steps'
writes go through the run store (``agents/runs/``), which sends them from the loop or on a
few database threads; the engine's tools run in threads of their own.
So a run waiting on the model or a tool costs no thread's time, and the process's runs do not
take turns at the interpreter lock. The threads pool cannot kill a task at a hard time limit;
a run's time is bounded by the engine's ``max_execution_time``, the model client's deadline
and the monitor's ``AGENT_RUN_HARD_LIMIT_SECONDS`` instead. The Celery tasks in
``agents/tasks.py`` only call in here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django import db as django_db
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError, close_old_connections, connection

from agents import events
from agents.attachments.selectors import NO_FILES, attachments_for_run
from agents.live import LiveText
from agents.llm.errors import public_failure_message
from agents.memory.services import MemoryContext, memory_after_run, memory_for_run
from agents.models import AgentRun, Message
from agents.profile_snapshot import ProfileSnapshot
from agents.react.errors import (
    AgentError,
    AwaitingApproval,
    BudgetExhausted,
    ModelError,
    RunCancelled,
    RunSuspended,
)
from agents.react.prompt import ContinuedAnswer, continuing_question, join_continuation
from agents.react.types import (
    ApprovalRequestStep,
    FinalAnswerStep,
    ModelCallRecord,
    Step,
    ThoughtStep,
)
from agents.runs.base import Claim, RunLost, RunStore
from agents.runs.queue import run_enqueue_on_commit, run_trace_enqueue
from agents.runs.reads import run_claim_refusal, run_fork_reused_steps, run_prior_steps
from agents.runs.store import run_store
from agents.runs.threads import in_database_thread
from agents.runtime import build_executor, snapshot_tool_configs
from agents.selectors import ended_run_get, notification_reach_get, runs_paused_exist
from agents.services.approvals import (
    approvals_expire,
    budget_pauses_expire,
    run_pause_for_approval,
    run_stop_at_budget,
)
from agents.services.evaluations import eval_run_ended
from agents.services.notifications import notification_for_run
from agents.services.replays import replay_tool_policy
from agents.services.schedules import schedule_run_ended
from agents.services.subagents import (
    child_runs_stop_after,
    delegation_max_depth,
    run_wait_for_children,
    subagent_waits_repair,
)
from agents.services.usage import usage_warn_budgets_crossed
from agents.tools.builtin.attachments import attachment_tools
from agents.tools.builtin.delegate import KIND as DELEGATE_KIND
from agents.tools.builtin.delegate import Delegate
from agents.traces import tracing_enabled
from chatsite.server.loop import process_loop

logger = logging.getLogger(__name__)


def worker_id() -> str:
    """Who holds a run: host and process, so a restarted worker is a different holder."""
    return f"{socket.gethostname()}:{os.getpid()}"


def runs_rescue(*, enqueue: Callable[[int], None]) -> list[int]:
    """Enqueue again runs no live worker holds (stale heartbeat, or queued and forgotten).

    Safe with several workers: one sweep per interval takes a lock in the cache, each run is
    enqueued at most once per stale period, and a duplicate delivery loses the claim anyway.
    """
    interval = settings.AGENT_SWEEP_INTERVAL_SECONDS
    if not cache.add("chat:sweep-lock", worker_id(), timeout=max(1, int(interval * 0.8))):
        return []
    # Each of these acts on paused runs only: one read of the status index spares their
    # three queries at nearly every sweep.
    if runs_paused_exist():
        # Pauses nobody decided in time end as declined, and their runs go on; runs nobody
        # continued past a budget in time end as stopped.
        approvals_expire()
        budget_pauses_expire()
        # A run waiting for sub-agents none of which is unfinished goes on (a backstop:
        # the end of its last child queues it already).
        subagent_waits_repair()
    rescued = []
    store = run_store()
    for run_id in store.needing_rescue(queued_for_seconds=settings.AGENT_QUEUED_RESCUE_SECONDS):
        if cache.add(
            f"chat:rescued:{run_id}", 1, timeout=max(1, settings.AGENT_HEARTBEAT_STALE_SECONDS)
        ):
            enqueue(run_id)
            rescued.append(run_id)
    if rescued:
        logger.warning("re-enqueued runs no live worker held: %s", rescued)
    return rescued


_shutting_down = threading.Event()


def shutting_down() -> bool:
    """Whether this process is handing its runs back: it claims no more."""
    return _shutting_down.is_set()


def runs_hand_back(*, enqueue: Callable[[int], None]) -> list[int]:
    """A warm shutdown: give every run this process drives back, at once.

    The runs are released (no holder, no heartbeat) and enqueued again, so another worker
    claims them within moments and resumes from their stored steps; then their threads here
    are stopped (a model call in flight is closed) and write nothing more, so the shutdown
    waits for no run. A step being written while this happens is either stored before the
    release and resumed from, or refused after it (docs/architecture.md, recovery).
    """
    _shutting_down.set()
    watches = _monitor.watches()
    released = run_store().release(
        run_ids=[watch.run_id for watch in watches], worker_id=worker_id()
    )
    for run_id in released:
        enqueue(run_id)
    for watch in watches:
        watch.stop(lost=True)
    if released:
        logger.warning("shutting down: handed back runs %s", released)
    return released


# --------------------------------------------------------------------------------------
# Driving one run
# --------------------------------------------------------------------------------------


def run_execute(*, run_id: int) -> concurrent.futures.Future[None] | None:
    """Claim the run, set it up, and hand it to the process's loop, which drives it to its
    end beside every other run the process holds; returns at once, with the future of that
    drive (None if the run is not ours, or ended before it was handed over).

    The calling thread (a Celery task's) is free as soon as the run is on the loop, so the
    worker's concurrency caps how many runs it starts at once, not how many it drives. The
    task is acknowledged before the run ends: a worker that dies meanwhile leaves the run's
    heartbeat to go stale, and the sweeper queues it again (docs/architecture.md, recovery).
    """
    # A run paused and resumed at once (an approval decided within moments) can arrive
    # while the drive that paused it is still leaving: wait for that, briefly.
    if not _monitor.wait_until_free(run_id, timeout=settings.AGENT_HEARTBEAT_INTERVAL_SECONDS):
        # This process still drives the run and only its heartbeat lagged (the database was
        # unreachable): the claim would succeed under the same worker id and start a second
        # copy writing the same steps.
        logger.warning("run %s is still driven by this process; not claimed", run_id)
        return None
    me = worker_id()
    store = run_store()
    claim = store.claim(run_id=run_id, worker_id=me, announce=True)
    if claim is None:
        # Finished, cancelled, paused, or held by a live worker: normal for a redelivered or
        # rescued task, but a run that never starts is hard to explain without this line.
        logger.info("run %s not claimed: %s", run_id, run_claim_refusal(run_id=run_id))
        return None
    run = claim.run
    watch: _Watch | None = None
    try:
        # Resuming after a pause the owner ended is not an interruption.
        if run.attempts - run.resumes > settings.AGENT_MAX_ATTEMPTS:
            message = (
                f"The run was interrupted {run.attempts - run.resumes - 1} times and was given up."
            )
            store.fail(run=run, code="too_many_attempts", message=message, worker_id=me)
            _run_ended(run.pk)
            return None
        if run.profile_version is None:
            message = "The agent this run used was deleted."
            store.fail(run=run, code="no_profile", message=message, worker_id=me)
            _run_ended(run.pk)
            return None
        watch = _monitor.start_watch(run.pk)
        if run.cancel_requested_at is not None:
            watch.cancel_requested.set()
        drive = _prepare(run, watch, me, claim)
    except Exception as error:
        if watch is not None:
            _monitor.end_watch(run.pk)
        close_old_connections()
        _run_stopped_by(error, run, me)
        _run_ended(run.pk)
        return None
    finally:
        events.publish_flush(timeout=5)
    return asyncio.run_coroutine_threadsafe(_drive_to_end(drive, run, me), process_loop())


def run_execute_to_end(*, run_id: int) -> None:
    """``run_execute``, waiting in this thread until the run's drive ends (tests, and any
    caller that must see the run's end)."""
    future = run_execute(run_id=run_id)
    if future is not None:
        future.result()


async def _drive_to_end(drive: _Drive, run: AgentRun, me: str) -> None:
    """Drive the run on the loop, summarise it if it ended with its answer, and deal with
    whatever stopped it as ``run_execute`` deals with an error while it sets the run up
    (``_run_stopped_by``)."""
    try:
        answer = await drive.steps
        if not isinstance(answer, _EndedEarly):
            await in_database_thread(drive.after_run, answer)
    except Exception as error:
        try:
            await in_database_thread(_run_stopped_by, error, run, me)
        except Exception:
            # The database is out of reach: the run's heartbeat goes stale, and the sweeper
            # queues it again.
            logger.exception("run %s could not be ended; the sweeper will rescue it", run.pk)
    finally:
        _monitor.end_watch(run.pk)
        await in_database_thread(_run_ended, run.pk)
    if tracing_enabled():
        # Off the run's path: the trace is built from the stored log by a task of its own.
        with contextlib.suppress(Exception):
            await in_database_thread(_trace_if_ended, run.pk)


def _run_ended(run_id: int) -> None:
    """After a drive: tell the owner where the run stands (finished, failed, waiting for
    them) and count a scheduled run's outcome on its schedule. Never raises: a run's end is
    stored already, and a notification lost to a database error is only a notification."""
    try:
        # One read for all of them: each effect decides for itself whether it applies, and
        # this spares the reads of those that cannot (docs/performance.md#after-run).
        ended = ended_run_get(run_id=run_id)
        if ended is None:
            return
        run = ended.run
        paused = None
        if ended.schedule_id is not None:
            paused = schedule_run_ended(run=run, schedule_id=ended.schedule_id)
        if paused is not None:
            # The schedule told the owner it paused itself: the count read with the run is
            # one notification short.
            reach = notification_reach_get(user_id=run.conversation.owner_id)
            ended = dataclasses.replace(ended, owner_reach=reach)
        # Before the run's notification, on the same socket: an open page shows the notice
        # at once, and a page that has the notification has the notice too.
        if ended.any_budget:
            usage_warn_budgets_crossed(run_id=run_id)
        notification_for_run(ended=ended)
        if ended.has_children:
            child_runs_stop_after(parent_run_id=run_id)
        if ended.replays_a_case:
            eval_run_ended(run=run)  # a case's replay is checked when it ends
    except Exception:
        logger.exception("run %s: its notification could not be written", run_id)


def _trace_if_ended(run_id: int) -> None:
    if AgentRun.objects.filter(pk=run_id, status__in=AgentRun.TERMINAL_STATUSES).exists():
        run_trace_enqueue(run_id=run_id)


def _run_stopped_by(error: Exception, run: AgentRun, me: str) -> None:
    """What stopping a run for ``error`` means: a run taken over or deleted stops quietly, a
    run whose database connection broke is handed back, any other error fails it."""
    if isinstance(error, RunLost):
        logger.warning("run %s was taken over by another worker; this copy stops", run.pk)
    elif isinstance(error, ObjectDoesNotExist):
        # The conversation (and with it the run) was deleted while it ran.
        logger.info("run %s disappeared while running", run.pk)
    elif _connection_broke(error):
        # A write's connection broke: the database went away, or the connection had died
        # unseen (a cut network path sends nothing, so no check at check-out can tell).
        # Whether that write committed is unknown; the stored steps say, so the run is
        # resumed from them (by any worker), not failed.
        logger.warning("run %s lost its database connection", run.pk, exc_info=error)
        _hand_back(run.pk, me)
    else:
        logger.error("run %s failed", run.pk, exc_info=error)
        message = "The agent stopped because of an internal error."
        run_store().fail(run=run, code="internal_error", message=message, worker_id=me)


# SQLSTATEs of a connection that ended: class 08 (connection exception), and the server
# shutting down or not yet accepting connections.
_CONNECTION_ENDED_STATES = ("57P01", "57P02", "57P03")


def _connection_broke(error: BaseException) -> bool:
    """Whether ``error`` says the database connection ended, not that a statement failed (a
    deadlock or a timeout is the run's own failure). Django wraps psycopg's error (the
    database threads); the loop's connections raise psycopg's own (``loop_pool``)."""
    if isinstance(error, django_db.Error) and isinstance(error.__cause__, psycopg.Error):
        error = error.__cause__
    if isinstance(error, psycopg.InterfaceError):
        return True  # the connection is closed
    if not isinstance(error, psycopg.OperationalError):
        return False
    # No SQLSTATE: the client lost the server (connection refused, reset, closed mid-read).
    state = error.sqlstate
    return state is None or state.startswith("08") or state in _CONNECTION_ENDED_STATES


def _hand_back(run_id: int, me: str) -> None:
    """Release one run this worker holds and queue it again; if the database is still out of
    reach, the sweeper finds it by its stale heartbeat instead."""
    try:
        released = run_store().release(run_ids=[run_id], worker_id=me)
    except DatabaseError:
        logger.warning("run %s could not be handed back; the sweeper will", run_id)
        return
    for released_id in released:
        run_enqueue_on_commit(run_id=released_id)


async def _store_pending(store: RunStore, run: AgentRun, pending: list[Step], me: str) -> None:
    """Store what was held back for the next step before the run ends without that step (a
    failed model call's record, most often)."""
    if pending:
        await store.arecord(run=run, steps=pending, worker_id=me)


@dataclass
class _Drive:
    """A run set up to be driven: the coroutine that stores its steps, and what to do with
    its answer (in a database thread) once it ends with one."""

    steps: Coroutine[Any, Any, Message | _EndedEarly | None]
    after_run: Callable[[Message | None], None]


def _prepare(run: AgentRun, watch: _Watch, me: str, claim: Claim) -> _Drive:
    """Everything a run starts with, read through the ORM in the calling thread: its
    snapshot, the steps of earlier attempts, its memory, its executor."""
    assert run.profile_version is not None  # run_execute fails a run without one
    snapshot = ProfileSnapshot.from_version(run.profile_version)
    inputs = claim.inputs
    if (scheduled_steps := inputs.firing_budget_steps) is not None:
        # A scheduled run's own step budget (agents/services/schedules.py).
        snapshot = dataclasses.replace(snapshot, budget_steps=scheduled_steps)
    if run.max_steps is not None:
        # A child run: at most what was left of its parent's steps (agents/services/subagents.py).
        snapshot = dataclasses.replace(
            snapshot, max_iterations=min(snapshot.max_iterations, run.max_steps)
        )
    conversation = run.conversation
    # Only a later attempt can find steps of this run already stored.
    prior_steps = run_prior_steps(run=run) if run.attempts > 1 else []
    # A fork starts with its original's steps before the fork's point: stored as its own
    # first steps, in one write, before its first model call; later attempts find them.
    reused = [] if prior_steps else run_fork_reused_steps(run=run)
    prior_steps = [*prior_steps, *reused]
    memory = (
        # A child sees its task only, not the conversation its parent runs in.
        MemoryContext(summary="", history=[], summary_id=None)
        if run.is_child
        else memory_for_run(
            conversation=conversation,
            snapshot=snapshot,
            model_name=run.model_name,
            before_message=run.trigger_message,
        )
    )
    tool_configs = claim.tool_configs
    if run.depth >= delegation_max_depth():
        # At the depth limit a run delegates no further.
        tool_configs = [
            row
            for row in snapshot_tool_configs(snapshot, enabled=tool_configs)
            if row.kind != DELEGATE_KIND
        ]
    # The conversation's files: the small ones whole, before the question, within the
    # profile's memory budget; the tools for the rest.
    files = (
        attachments_for_run(
            conversation_id=conversation.pk, token_budget=snapshot.memory.token_budget
        )
        if inputs.has_ready_files
        else NO_FILES
    )
    answer_so_far: list[str] = []
    # A replay answers its tool calls from the run it replays (None for any other run).
    replay_policy = replay_tool_policy(run=run)
    live_text = LiveText(conversation_id=conversation.pk, run_id=run.pk, attempt=run.attempts)
    # "Continue" after Stop: the answer streams, and is stored, as the stopped text followed
    # by what the model adds (so a Stop of this run keeps all of it, and Continue works again).
    stopped = run.continues_answer if run.continues_answer_id is not None else None
    partial = stopped.content if stopped is not None else ""
    continued = ContinuedAnswer(partial) if partial else None

    def on_answer_delta(text: str) -> None:
        if continued is not None and not (text := continued.feed(text)):
            return
        answer_so_far.append(text)
        live_text.answer_delta(text)

    def on_answer_reset() -> None:
        answer_so_far.clear()  # it was a thought after all (native mode)
        if continued is not None:
            continued.reset()
        live_text.answer_reset()

    executor = build_executor(
        snapshot=snapshot,
        user=conversation.owner,
        conversation=conversation,
        should_cancel=watch.should_cancel,
        on_answer_delta=on_answer_delta,
        on_answer_reset=on_answer_reset,
        on_thought_delta=live_text.thought_delta,
        budget_grants=run.budget_grants,
        # The rows the snapshot names, read with the claim (``run_claim_with_tools``).
        model_config=run.model_config,
        tool_configs=tool_configs,
        extra_tools=attachment_tools(user=conversation.owner, conversation=conversation)
        if files.searchable
        else (),
        tool_policy=replay_policy,
        user_instructions=_user_instructions(run, me, inputs.owner_instructions),
    )
    if replay_policy is not None:
        replay_policy.skip_answered(prior_steps, executor.tool_named)
    for tool in executor.tools:
        if isinstance(tool, Delegate):
            tool.parent_run_id = run.pk
    question = run.task if run.is_child else run.trigger_message.content
    if partial:
        question = continuing_question(question, partial, executor.labels)
    steps = executor.arun(
        f"{files.inline}\n\n{question}" if files.inline else question,
        history=memory.history,
        memory_summary=memory.summary,
        prior_steps=prior_steps,
        interrupt=watch.interrupted,
    )
    if partial:
        steps = _continuing(steps, partial)
    announced = claim.started is not None
    steps_driven = _drive(
        run_store(),
        run,
        watch,
        me,
        snapshot.slug,
        live_text.track(steps),
        answer_so_far,
        announced=announced,
        reused=reused,
    )

    def after_run(answer: Message | None) -> None:
        if run.is_replay or run.is_child:
            return  # a replay's copy, or a child's task, is not the conversation's to summarise
        memory_after_run(
            conversation=conversation, snapshot=snapshot, run=run, context=memory, answer=answer
        )

    return _Drive(steps_driven, after_run)


def _user_instructions(run: AgentRun, me: str, instructions: str) -> str:
    """The owner's custom instructions for this run (``instructions``, read with the claim):
    kept on the run when it first starts (``AgentRun.user_instructions``), so every later
    attempt is given the same text and the run inspector shows what was added. A replay
    reproduces a stored run for staff: none."""
    if run.is_replay:
        return ""
    if run.attempts > 1:
        return run.user_instructions
    if instructions:
        AgentRun.objects.filter(pk=run.pk, worker_id=me).update(user_instructions=instructions)
        run.user_instructions = instructions
    return instructions


async def _continuing(
    steps: AsyncGenerator[Step, None], partial: str
) -> AsyncGenerator[Step, None]:
    """The steps of a run continuing a stopped answer: its answer is that answer and the
    rest the model wrote, one text."""
    async with contextlib.aclosing(steps):
        async for step in steps:
            if isinstance(step, FinalAnswerStep):
                step = dataclasses.replace(step, text=join_continuation(partial, step.text))
            yield step


class _EndedEarly:
    """What ``_drive`` returns for a run that did not end with its answer (cancelled,
    paused, failed, lost): nothing to summarise."""


_ENDED_EARLY = _EndedEarly()


async def _drive(
    store: RunStore,
    run: AgentRun,
    watch: _Watch,
    me: str,
    profile: str,
    steps: AsyncIterator[Step],
    answer_so_far: list[str],
    *,
    announced: bool,
    reused: Sequence[Step] = (),
) -> Message | _EndedEarly | None:
    """Announce the attempt (unless the claim did), then store the run's steps as the engine
    yields them, on the process's event loop, through the run store's awaited writes (which
    never block the loop). Returns the answer's message, or ``_ENDED_EARLY``."""
    if not announced:  # a store may store run.started with the claim (``Claim.started``)
        await store.astart(run=run, model=run.model_name, profile=profile, worker_id=me)
    if reused:  # a fork's first steps, its original's (``run_fork_reused_steps``)
        await store.arecord(run=run, steps=list(reused), worker_id=me)
    # A model call's record and a thought are followed at once by the steps parsed from the
    # same reply (an action, an error, the answer): they wait here and are stored with those
    # in one transaction. Every other step may be followed by a tool or a model call, so it
    # is stored (and shown) before the engine goes on.
    pending: list[Step] = []
    answer: Message | None = None
    # Calls the engine asks a person about: stored with the pause, when it raises.
    approval_requests: list[ApprovalRequestStep] = []
    try:
        async for step in steps:
            if watch.lost:
                # Another worker took the run over (it writes from here on), or it ended
                # elsewhere: said in the log, so a run that stops without a word is traceable.
                logger.warning(
                    "run %s was lost while this worker drove it; this copy stops", run.pk
                )
                return _ENDED_EARLY
            if isinstance(step, ApprovalRequestStep):
                approval_requests.append(step)
                continue
            if isinstance(step, ModelCallRecord | ThoughtStep):
                pending.append(step)
                continue
            if isinstance(step, FinalAnswerStep):
                answer = await store.afinish(run=run, step=step, worker_id=me, preceding=pending)
            else:
                await store.arecord(run=run, steps=[*pending, step], worker_id=me)
            pending = []
    except RunCancelled:
        if watch.lost:
            logger.warning("run %s was lost while this worker drove it; this copy stops", run.pk)
            return _ENDED_EARLY
        await _store_pending(store, run, pending, me)
        partial = "".join(answer_so_far)
        await store.acancel(run=run, partial_answer=partial, worker_id=me)
        return _ENDED_EARLY
    except AwaitingApproval:
        await _store_pending(store, run, pending, me)
        # The worker is freed: the run waits in the database, not in this process.
        await in_database_thread(
            run_pause_for_approval, run=run, requests=approval_requests, worker_id=me
        )
        return _ENDED_EARLY
    except RunSuspended as error:
        await _store_pending(store, run, pending, me)
        # A delegate call's child has not ended: the run waits for it in the database,
        # holding no worker, and the end of its last child queues it again.
        await in_database_thread(
            run_wait_for_children, run=run, call_ids=error.call_ids, worker_id=me
        )
        return _ENDED_EARLY
    except BudgetExhausted as error:
        await _store_pending(store, run, pending, me)
        await in_database_thread(
            run_stop_at_budget,
            run=run,
            limit=error.limit,
            message=str(error),
            tool=error.tool,
            worker_id=me,
        )
        return _ENDED_EARLY
    except ModelError as error:
        await _store_pending(store, run, pending, me)
        # The user gets a plain reason and the run's id; staff read the detail in the inspector.
        message = public_failure_message(error, reference=f"run {run.pk}")
        await store.afail(
            run=run, code=error.code, message=message, detail=str(error), worker_id=me
        )
        return _ENDED_EARLY
    except AgentError as error:
        await _store_pending(store, run, pending, me)
        code = getattr(error, "code", "") or "agent_error"
        message = str(error) or "The agent stopped."
        await store.afail(run=run, code=code, message=message, worker_id=me)
        return _ENDED_EARLY
    return answer


# --------------------------------------------------------------------------------------
# Heartbeats and cancel requests, for every run this process holds
# --------------------------------------------------------------------------------------


@dataclass
class _Watch:
    run_id: int
    cancel_requested: threading.Event = field(default_factory=threading.Event)
    # Set when the heartbeat finds the run held by someone else or ended elsewhere.
    lost: bool = False
    started: float = field(default_factory=time.monotonic)
    # Set (on the run driver's loop) to end the model call or tool wait in progress at once.
    interrupted: asyncio.Event = field(default_factory=asyncio.Event)

    def should_cancel(self) -> bool:
        return self.lost or self.cancel_requested.is_set()

    def stop(self, *, lost: bool = False) -> None:
        """Cancel (or, with ``lost``, abandon) the run now: the engine stops before its next
        model or tool call, and a model call in flight is closed at once."""
        if lost:
            self.lost = True
        else:
            self.cancel_requested.set()
        process_loop().call_soon_threadsafe(self.interrupted.set)


class _RunMonitor:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._released = threading.Condition(self._lock)
        self._watches: dict[int, _Watch] = {}
        self._thread: threading.Thread | None = None

    def watches(self) -> list[_Watch]:
        with self._lock:
            return list(self._watches.values())

    def holds(self, run_id: int) -> bool:
        """Whether this process is driving the run right now."""
        with self._lock:
            return run_id in self._watches

    def wait_until_free(self, run_id: int, *, timeout: float) -> bool:
        """Whether no thread of this process drives the run, waiting up to ``timeout`` for
        one that is leaving it."""
        with self._released:
            return self._released.wait_for(lambda: run_id not in self._watches, timeout)

    def start_watch(self, run_id: int) -> _Watch:
        """Watch a run this process starts driving, until ``end_watch``."""
        watch = _Watch(run_id)
        with self._lock:
            self._watches[run_id] = watch
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="chatsite-run-monitor", daemon=True
                )
                self._thread.start()
        return watch

    def end_watch(self, run_id: int) -> None:
        """The process no longer drives the run."""
        with self._lock:
            self._watches.pop(run_id, None)
            self._released.notify_all()

    @contextlib.contextmanager
    def watch(self, run_id: int) -> Iterator[_Watch]:
        watch = self.start_watch(run_id)
        try:
            yield watch
        finally:
            self.end_watch(run_id)

    def _loop(self) -> None:
        last_beat = time.monotonic()
        while True:
            time.sleep(settings.AGENT_CANCEL_POLL_SECONDS)
            with self._lock:
                watches = dict(self._watches)
            if not watches:
                connection.close()
                continue
            try:
                _fail_overdue(watches)
                for run_id in run_store().cancel_requested(run_ids=list(watches)):
                    if not watches[run_id].cancel_requested.is_set():
                        watches[run_id].stop()
                if time.monotonic() - last_beat >= settings.AGENT_HEARTBEAT_INTERVAL_SECONDS:
                    last_beat = time.monotonic()
                    held = run_store().heartbeat(run_ids=list(watches), worker_id=worker_id())
                    for run_id, watch in watches.items():
                        if run_id not in held and not watch.lost:
                            watch.stop(lost=True)
            except Exception:
                # The database may be restarting: keep beating once it is back.
                logger.exception("run monitor could not reach the database")
                connection.close()


def _fail_overdue(watches: dict[int, _Watch]) -> None:
    """End runs past the hard limit, whatever their drive is stuck on.

    Nothing kills a run's drive from outside, so this is the backstop behind the engine's
    ``max_execution_time`` and the model deadline: the run is failed visibly and its drive,
    once it wakes, finds the run lost and writes nothing more.
    """
    limit = settings.AGENT_RUN_HARD_LIMIT_SECONDS
    now = time.monotonic()
    for run_id, watch in list(watches.items()):
        if watch.lost or now - watch.started <= limit:
            continue
        del watches[run_id]
        run = AgentRun.objects.select_related("conversation").filter(pk=run_id).first()
        if run is not None:
            message = f"The run took longer than {limit} seconds and was stopped."
            run_store().fail(run=run, code="run_timeout", message=message, worker_id=worker_id())
        # After the failure is stored: the run's thread, woken, finds the run ended.
        watch.stop(lost=True)


_monitor = _RunMonitor()
