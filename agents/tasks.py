"""Celery tasks: thin, keyed by id, safe to run twice. The work is in
``agents/services/execution.py``; this module is the Celery wiring around it."""

from __future__ import annotations

import logging
import threading
import time

from celery import current_app, shared_task
from celery.exceptions import Reject
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings
from django.db import connection

from agents import traces
from agents.services import (
    attachments,
    evaluations,
    execution,
    notifications,
    schedules,
    webhooks,
)

logger = logging.getLogger(__name__)


# Set-ups take turns (settings.AGENT_RUN_SETUPS_AT_ONCE): a thread waiting here holds no
# database connection, so a burst of runs uses a few pooled connections, not one per thread,
# while the rest of the pool's threads stay free for slow tasks (summaries, files).
_run_setups = threading.BoundedSemaphore(settings.AGENT_RUN_SETUPS_AT_ONCE)


def _run_execute(run_id: int) -> None:
    with _run_setups:
        # Asked once the turn comes: the hand-back may have begun while this thread waited.
        if execution.shutting_down():
            # Back to the queue for a worker that stays (acks_late: nothing is lost).
            raise Reject(requeue=True)
        try:
            # Returns once the run is on the process's loop, not when it ends.
            drive = execution.run_execute(run_id=run_id)
        finally:
            # Threads of the pool are reused: give the connection back between tasks.
            connection.close()
    if drive is not None and current_app.conf.task_always_eager:
        # An eager app runs a task as a call, to its end: so does the run's (outside its
        # turn, as a run may start others on the way: a sub-agent's).
        drive.result()


run_execute = shared_task(name="agents.run_execute", acks_late=True, ignore_result=True)(
    _run_execute
)
# The task's name before it was named after its service: messages a broker still holds from
# before a deploy run too. Nothing enqueues it any more; drop it a release later.
run_agent_queued_before_rename = shared_task(
    name="agents.run_agent", acks_late=True, ignore_result=True
)(_run_execute)


@shared_task(name="agents.run_trace_export", ignore_result=True)
def run_trace_export(run_id: int) -> bool:
    try:
        return traces.run_trace_export(run_id=run_id)
    finally:
        connection.close()


@shared_task(name="agents.runs_rescue", ignore_result=True)
def runs_rescue() -> list[int]:
    # Only ever called in the sweeper thread below, never enqueued: no older name to keep.
    return execution.runs_rescue(enqueue=run_execute.delay)


# --------------------------------------------------------------------------------------
# The sweeper, started in every worker process
# --------------------------------------------------------------------------------------


def _sweep_forever() -> None:
    while True:
        try:
            runs_rescue()
        except Exception:
            logger.exception("sweeping stale runs failed")
        finally:
            connection.close()
        time.sleep(settings.AGENT_SWEEP_INTERVAL_SECONDS)


@worker_ready.connect
def _warm_up(**kwargs) -> None:
    # The first run of a process would otherwise load tiktoken's encoding and import the
    # markdown renderer (several hundred ms holding the interpreter lock, while the other
    # runs of the process wait); do it before runs arrive.
    def load() -> None:
        try:
            from agents.llm.tokens import count_tokens
            from agents.rendering import render_markdown

            count_tokens("warm up")
            render_markdown("warm up")
        except Exception:
            logger.exception("warming up the worker failed; the first run will do it")

    threading.Thread(target=load, name="chatsite-warm-up", daemon=True).start()


@worker_ready.connect
def _start_sweeper(**kwargs) -> None:
    # A thread in each worker rather than celery beat: nothing else to deploy, and the cache
    # lock in runs_rescue keeps several workers from sweeping at once.
    threading.Thread(target=_sweep_forever, name="chatsite-run-sweeper", daemon=True).start()


@worker_shutting_down.connect
def _hand_back_runs(**kwargs) -> None:
    # Called inside the SIGTERM handler of the main thread: the database and the broker are
    # used from a thread of its own, never from a signal handler.
    def hand_back() -> None:
        try:
            execution.runs_hand_back(enqueue=run_execute.delay)
        except Exception:
            logger.exception("handing runs back failed; the sweeper will rescue them")
        finally:
            connection.close()

    threading.Thread(target=hand_back, name="chatsite-hand-back").start()


@shared_task(name="agents.attachment_extract", acks_late=True, ignore_result=True)
def attachment_extract(attachment_id: int) -> None:
    """Read an attached file into passages (safe to run twice; the service checks its state)."""
    try:
        attachments.attachment_extract(attachment_id=attachment_id)
    finally:
        connection.close()


# --------------------------------------------------------------------------------------
# Schedules and notifications (agents/services/schedules.py, notifications.py, webhooks.py)
# --------------------------------------------------------------------------------------


@shared_task(name="agents.schedules_fire_due", ignore_result=True)
def schedules_fire_due() -> list[int]:
    """celery beat's one entry (settings.CELERY_BEAT_SCHEDULE): fire what is due. Safe to run
    twice or at once on two workers: a firing is unique per schedule and occurrence."""
    try:
        return schedules.schedules_fire_due()
    finally:
        connection.close()


@shared_task(name="agents.webhook_deliver", bind=True, acks_late=True, ignore_result=True)
def webhook_deliver(self, delivery_id: int) -> None:
    """One attempt of a webhook delivery; a failed one is retried with doubling waits (the
    delivery row counts the attempts, so a redelivered task does not add one)."""
    try:
        webhooks.webhook_deliver(delivery_id=delivery_id)
    except webhooks.DeliveryFailed as error:
        countdown = settings.WEBHOOK_RETRY_BASE_SECONDS * 2**self.request.retries
        raise self.retry(exc=error, countdown=countdown, max_retries=None) from None
    finally:
        connection.close()


@shared_task(name="agents.notification_email_send", ignore_result=True)
def notification_email_send(notification_id: int) -> None:
    try:
        notifications.notification_email_send(notification_id=notification_id)
    finally:
        connection.close()


@shared_task(name="agents.eval_run_queue", acks_late=True, ignore_result=True)
def eval_run_queue(eval_run_id: int) -> int:
    """Start the replays of an evaluation run's cases (agents/services/evaluations.py)."""
    return evaluations.eval_run_queue(eval_run_id=eval_run_id)
