"""The run store on PostgreSQL: each fenced write is one statement with its own commit
(``agents/db/statements.py``, "The run's life"), fenced inside the statement (its ``held``
step), instead of the ORM's several round trips (docs/performance.md#fenced-append).

A statement goes out on whichever transport the caller has: a sync caller's Django
connection (``prepared_cursor``: prepared once per connection), or, for the run driver on
the process's event loop, the loop's own connections (``chatsite/server/db/loop_pool.py``)
where the process has them, else a database thread. The same statement text either way,
the same function turning its rows into events, published once it has committed.

Writes without a ``worker_id`` (not a worker) and the writes the driver makes rarely (fail,
cancel, release) are the portable store's.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar, cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models
from django.utils import timezone

from agents import events
from agents.db import statements
from agents.db.rows import instance, instances
from agents.models import (
    AgentRun,
    Attachment,
    Conversation,
    Message,
    ModelConfig,
    PromptVersion,
    RunEvent,
    ToolConfig,
    UsageEntry,
)
from agents.protocol import FrameType, run_finished_payload
from agents.react.types import FinalAnswerStep, ModelCallRecord, Step
from agents.runs.base import (
    Claim,
    RunLost,
    StartInputs,
    call_records,
    started_payload,
    step_items,
)
from agents.runs.portable import (
    ACTIVE_STATUSES,
    CLAIM_READS,
    PortableRunStore,
    Status,
    stale_before,
)
from agents.runs.threads import in_database_thread
from chatsite.server.db import loop_pool
from chatsite.server.db.prepared import prepared_cursor

_T = TypeVar("_T")
Rows = Sequence[tuple[Any, ...]]


class _Write(NamedTuple, Generic[_T]):
    """One statement of the store: its text, its parameters, and what turns the rows it
    returns into the caller's result and the events to publish (raising ``RunLost`` if the
    fence refused it)."""

    statement: str
    params: dict[str, Any]
    read: Callable[[Rows], tuple[_T, list[RunEvent]]]


class PostgresRunStore(PortableRunStore):
    # The fenced writes: one statement each, on any transport.

    def start(
        self, *, run: AgentRun, model: str, profile: str, worker_id: str | None = None
    ) -> RunEvent:
        if worker_id is None:
            return super().start(run=run, model=model, profile=profile, worker_id=None)
        return _now(_start_write(run, model, profile, worker_id))[0]

    async def astart(self, *, run: AgentRun, model: str, profile: str, worker_id: str) -> RunEvent:
        return (await _later(_start_write(run, model, profile, worker_id)))[0]

    def record(
        self, *, run: AgentRun, steps: Sequence[Step], worker_id: str | None = None
    ) -> list[RunEvent]:
        if worker_id is None:
            return super().record(run=run, steps=steps, worker_id=None)
        return _now(_record_write(run, call_records(steps), step_items(steps), worker_id))

    async def arecord(
        self, *, run: AgentRun, steps: Sequence[Step], worker_id: str
    ) -> list[RunEvent]:
        return await _later(_record_write(run, call_records(steps), step_items(steps), worker_id))

    def finish(
        self,
        *,
        run: AgentRun,
        step: FinalAnswerStep,
        worker_id: str | None = None,
        preceding: Sequence[Step] = (),
    ) -> Message | None:
        if worker_id is None or run.is_child:
            # A child run writes no answer message: the ORM's path, which can leave it out.
            return super().finish(run=run, step=step, worker_id=worker_id, preceding=preceding)
        return _now(_finish_write(run, step, preceding, worker_id))

    async def afinish(
        self,
        *,
        run: AgentRun,
        step: FinalAnswerStep,
        worker_id: str,
        preceding: Sequence[Step] = (),
    ) -> Message | None:
        if run.is_child:
            return await in_database_thread(
                self.finish, run=run, step=step, worker_id=worker_id, preceding=preceding
            )
        return await _later(_finish_write(run, step, preceding, worker_id))

    # The claim reads seven models' rows with it: converted as the ORM converts them
    # (``agents.db.rows``), which needs a Django connection, so it goes out on one.

    def claim(self, *, run_id: int, worker_id: str, announce: bool) -> Claim | None:
        params = {
            "running": Status.RUNNING.value,
            "holder": worker_id,
            "now": timezone.now(),
            "run": run_id,
            "active": [str(status) for status in ACTIVE_STATUSES],
            "stale": stale_before(),
            "announce": announce,
            "max_attempts": settings.AGENT_MAX_ATTEMPTS,
            "started": FrameType.RUN_STARTED.value,
            "ready": Attachment.State.READY.value,
        }
        models_read = _claim_models()
        with prepared_cursor() as cursor:
            cursor.execute(statements.run_claim(models_read), params)
            found = cursor.fetchall()
        if not found:
            return None
        run, conversation, owner, question, version, endpoint = instances(models_read, found[0])
        _cache_related(Conversation, "owner", conversation, owner)
        related = zip(CLAIM_READS, (conversation, question, version, endpoint), strict=True)
        for path, value in related:
            _cache_related(AgentRun, path.split("__")[0], run, value)
        # The tool's columns follow the others (a run without tools has one row, its tool
        # NULL), then the inputs (the same on every row), then the announcement's four
        # (NULL if none).
        first_tool_column = sum(len(model._meta.concrete_fields) for model in models_read)
        first_input_column = -len(StartInputs._fields) - 4
        tools = [instance(ToolConfig, row[first_tool_column:first_input_column]) for row in found]
        inputs = StartInputs(*found[0][first_input_column:-4])
        started = _claim_started(cast(AgentRun, run), found[0][-4:])
        events.publish_on_commit([started] if started is not None else [])
        tool_configs = [cast(ToolConfig, tool) for tool in tools if tool]
        return Claim(cast(AgentRun, run), tool_configs, inputs, started)

    # The monitor's polls, for every run the process holds: one statement, the ids as one
    # array parameter rather than one placeholder each.

    def heartbeat(self, *, run_ids: list[int], worker_id: str) -> set[int]:
        if not run_ids:
            return set()
        params = {
            "now": timezone.now(),
            "ids": list(run_ids),
            "holder": worker_id,
            "running": Status.RUNNING.value,
        }
        return _ids(statements.runs_heartbeat(), params)

    def cancel_requested(self, *, run_ids: list[int]) -> set[int]:
        if not run_ids:
            return set()
        return _ids(statements.runs_cancel_requested(), {"ids": list(run_ids)})


# The transports: a statement sent now on the caller's Django connection, or later from the
# process's loop. Either way the events are published once the statement has committed.


def _now(write: _Write[_T]) -> _T:
    """On the caller's Django connection: its own commit, or the caller's transaction's."""
    with prepared_cursor() as cursor:
        cursor.execute(write.statement, write.params)
        rows = cursor.fetchall()
    result, stored = write.read(rows)
    events.publish_on_commit(stored)
    return result


async def _later(write: _Write[_T]) -> _T:
    """From the process's loop: on the loop's connections (its own commit), else on a
    database thread as ``_now``."""
    if not loop_pool.available():
        return await in_database_thread(_now, write)
    rows = await loop_pool.fetch_all(write.statement, write.params)
    result, stored = write.read(rows)
    events.publish_committed(stored)
    return result


def _ids(statement: str, params: dict[str, Any]) -> set[int]:
    with prepared_cursor() as cursor:
        cursor.execute(statement, params)
        return {row[0] for row in cursor.fetchall()}


# The statements' parameters, and their rows read back.


def _record_write(
    run: AgentRun,
    records: Sequence[ModelCallRecord],
    items: Sequence[tuple[str, dict[str, Any]]],
    worker_id: str,
) -> _Write[list[RunEvent]]:
    params = _fenced_params(run, records, items, worker_id)

    def read(rows: Rows) -> tuple[list[RunEvent], list[RunEvent]]:
        if not rows or not rows[0][0]:
            raise RunLost(f"run {run.pk} is no longer held by {worker_id}")
        run.prompt_tokens += params["prompt"]
        run.completion_tokens += params["completion"]
        if items:
            run.conversation.last_seq = rows[-1][2]
        returned = [(row[1], row[2], row[3]) for row in rows if row[1] is not None]
        stored = _events(run, returned, items)
        return stored, stored

    return _Write(statements.run_record(), params, read)


def _start_write(run: AgentRun, model: str, profile: str, worker_id: str) -> _Write[list[RunEvent]]:
    items = [(FrameType.RUN_STARTED.value, started_payload(run, model, profile))]
    return _record_write(run, [], items, worker_id)


def _finish_write(
    run: AgentRun, step: FinalAnswerStep, preceding: Sequence[Step], worker_id: str
) -> _Write[Message | None]:
    now = timezone.now()
    records = call_records(preceding)
    base = _fenced_params(run, records, [], worker_id)
    # The totals as the statement leaves them: only the holder adds to them, and this
    # process has added every one it stored since the claim read them.
    ended = copy.copy(run)
    ended.prompt_tokens = run.prompt_tokens + base["prompt"]
    ended.completion_tokens = run.completion_tokens + base["completion"]
    ended.status, ended.finished_at, ended.heartbeat_at = Status.SUCCEEDED, now, None
    answer = Message(
        conversation_id=run.conversation_id,
        role=Message.Role.ASSISTANT,
        content=step.text,
        run_id=run.pk,
        parent_id=run.trigger_message_id,
        created_at=now,
    )
    finished = run_finished_payload(run=ended, message=answer, stop_reason=step.stop_reason)
    items: list[tuple[str, dict[str, Any]]] = [
        *step_items(preceding),
        (FrameType.RUN_FINISHED.value, finished),
    ]
    params = {
        **_fenced_params(run, records, items, worker_id),
        "succeeded": Status.SUCCEEDED.value,
        "now": now,
        "answer": step.text,
        "role": Message.Role.ASSISTANT.value,
        "question": run.trigger_message_id,
        "finished_type": FrameType.RUN_FINISHED.value,
    }

    def read(rows: Rows) -> tuple[Message | None, list[RunEvent]]:
        # No row: the run had ended meanwhile (a cancel, the hard limit) or was taken over,
        # and nothing was written.
        if not rows or not rows[0][0]:
            return None, []
        answer.pk, answer.on_active_branch, started_at = rows[0][1:4]
        finished["message"]["id"] = answer.pk
        run.prompt_tokens += params["prompt"]
        run.completion_tokens += params["completion"]
        run.status, run.finished_at, run.heartbeat_at = Status.SUCCEEDED, now, None
        run.started_at = started_at
        run.conversation.last_seq = rows[-1][5]
        stored = _events(run, [row[4:7] for row in rows], items)
        return answer, stored

    return _Write(statements.run_finish(), params, read)


def _fenced_params(
    run: AgentRun,
    records: Sequence[ModelCallRecord],
    items: Sequence[tuple[str, dict[str, Any]]],
    worker_id: str,
) -> dict[str, Any]:
    """The parameters of ``statements.run_record``. The calls and the events go as one JSON
    document each: an array parameter of JSON texts is escaped element by element in
    Python, one text parameter in C."""
    calls = [
        {
            "messages": record.messages,
            "options": record.options,
            "text": record.response_text,
            "tools": record.tool_calls,
            "prompt": record.prompt_tokens,
            "completion": record.completion_tokens,
            "ms": record.duration_ms,
            "error": record.error,
        }
        for record in records
    ]
    return {
        "prompt": sum(record.prompt_tokens for record in records),
        "completion": sum(record.completion_tokens for record in records),
        "calls": json.dumps(calls),
        "ledger_kind": UsageEntry.Kind.RUN.value,
        "run": run.pk,
        "conv": run.conversation_id,
        "holder": worker_id,
        "running": Status.RUNNING.value,
        "n": len(items),
        "events": json.dumps([{"type": type, "payload": payload} for type, payload in items]),
    }


def _events(
    run: AgentRun,
    returned: Sequence[Sequence[Any]],
    items: Sequence[tuple[str, dict[str, Any]]],
) -> list[RunEvent]:
    """The events a statement stored: its ``id, seq, created_at`` per event, in seq order,
    beside the ``(type, payload)`` it was given for each."""
    return [
        RunEvent(
            pk=event_id,
            conversation_id=run.conversation_id,
            run_id=run.pk,
            seq=seq,
            type=type,
            payload=payload,
            created_at=created_at,
        )
        for (event_id, seq, created_at), (type, payload) in zip(returned, items, strict=True)
    ]


@functools.cache
def _claim_models() -> tuple[type[models.Model], ...]:
    """The models whose rows a claim reads, in the order of its columns (then the tool's)."""
    return (AgentRun, Conversation, get_user_model(), Message, PromptVersion, ModelConfig)


def _claim_started(run: AgentRun, returned: Sequence[Any]) -> RunEvent | None:
    """The ``run.started`` a claim stored (its id, seq, payload and time as the statement
    returned them); None if it announced nothing."""
    event_id, seq, payload, created_at = returned
    if event_id is None:
        return None
    # Django's connections load jsonb as text (its JSONField decodes it).
    payload = json.loads(payload) if isinstance(payload, str) else payload
    # The conversation was read before the statement's own bump.
    run.conversation.last_seq = seq
    return RunEvent(
        pk=event_id,
        conversation_id=run.conversation_id,
        run_id=run.pk,
        seq=seq,
        type=FrameType.RUN_STARTED.value,
        payload=payload,
        created_at=created_at,
    )


def _cache_related(model: type[models.Model], name: str, obj: Any, value: Any) -> None:
    """What ``select_related`` does: ``obj.name`` is ``value`` without a query."""
    field = cast("models.ForeignKey[Any, Any]", model._meta.get_field(name))
    field.set_cached_value(obj, value)
