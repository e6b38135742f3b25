"""The event log and the life of an agent run: claim, heartbeat, steps, and how it ends.

Each writing function here is one transaction. What one model reply produced (its call
record, the thought, then the action, error or final answer parsed from it) is stored
together by ``run_record_steps`` or ``run_finish(preceding=...)``; a step that is followed by
a tool or a model call is durable (and published) before the engine goes on, so a crash
loses at most the reply in flight.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, NamedTuple, cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, models, transaction
from django.db.models import F, Max, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents import events, loop_db
from agents.models import (
    AgentRun,
    Conversation,
    Message,
    ModelCall,
    ModelConfig,
    PromptVersion,
    RunEvent,
    ToolConfig,
    UsageEntry,
)
from agents.prepared import prepared_cursor
from agents.protocol import (
    FrameType,
    run_cancelled_payload,
    run_failed_payload,
    run_finished_payload,
    run_started_payload,
)
from agents.react.types import (
    FinalAnswerStep,
    ModelCallRecord,
    Step,
    step_from_event,
    step_to_event,
)
from agents.rows import columns, instance, instances
from agents.services.usage import usage_record_run_tokens

logger = logging.getLogger(__name__)

Status = AgentRun.Status
ACTIVE_STATUSES = AgentRun.ACTIVE_STATUSES


class RunLost(Exception):
    """This worker no longer holds the run: another took it over, or it ended meanwhile."""


# --------------------------------------------------------------------------------------
# The event log
# --------------------------------------------------------------------------------------


def event_append(
    *,
    conversation: Conversation,
    run: AgentRun | None,
    type: FrameType,
    payload: dict[str, Any],
    conversation_fields: Mapping[str, Any] | None = None,
) -> RunEvent:
    """Append one event to the conversation's log; see ``events_append``."""
    return events_append(
        conversation=conversation,
        run=run,
        items=[(type, payload)],
        conversation_fields=conversation_fields,
    )[0]


def events_append(
    *,
    conversation: Conversation,
    run: AgentRun | None,
    items: Sequence[tuple[FrameType, dict[str, Any]]],
    conversation_fields: Mapping[str, Any] | None = None,
) -> list[RunEvent]:
    """Append events (``(type, payload)`` pairs, in order) to the conversation's log, and
    publish them together once the transaction commits.

    The conversation row stays locked from the ``last_seq`` bump to commit, so concurrent
    appends take turns and ``seq`` increases by exactly one per event (no gaps, no repeats).
    ``conversation_fields`` (field name → value) are written to the conversation's row in
    the same statement as the bump, saving the caller an UPDATE of its own.

    Called inside a caller's transaction it adds no savepoint (two round trips per call):
    an error here rolls back the caller's whole transaction, which is what every caller does.
    """
    assign = conversation_fields or {}
    if items and _fenced_sql_available():
        with transaction.atomic(savepoint=False):
            appended = _bump_and_insert(conversation, run, items, assign)
            events.publish_on_commit(appended)
        return appended
    with transaction.atomic(savepoint=False):
        last = _bump_seq(conversation.pk, by=len(items), assign=assign)
        conversation.last_seq = last
        first = last - len(items) + 1
        appended = RunEvent.objects.bulk_create(
            RunEvent(
                conversation=conversation, run=run, seq=first + offset, type=type, payload=payload
            )
            for offset, (type, payload) in enumerate(items)
        )
        events.publish_on_commit(appended)
    return appended


def _bump_and_insert(
    conversation: Conversation,
    run: AgentRun | None,
    items: Sequence[tuple[FrameType, dict[str, Any]]],
    assign: Mapping[str, Any],
) -> list[RunEvent]:
    """``events_append`` on PostgreSQL: the seq bump (with ``assign``) and the events' insert
    as one statement, the events taking the seqs the bump returned, as the worker's fenced
    writes do. Raises ``Conversation.DoesNotExist`` if the conversation was deleted."""
    bump, bump_values = conversation_bump_sql(assign)
    quote = connection.ops.quote_name
    # Only quoted names from the models' own metadata are formatted in; values are parameters.
    sql = f"""
WITH bumped AS ({bump} RETURNING {quote("last_seq")} - %s AS base)
INSERT INTO {quote(RunEvent._meta.db_table)}
    (conversation_id, run_id, seq, type, payload, created_at)
SELECT %s::bigint, %s::bigint, bumped.base + event.ord, event.doc ->> 'type',
    event.doc -> 'payload', now()
FROM bumped, jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS event(doc, ord)
RETURNING id, seq, created_at
"""  # noqa: S608
    run_id = run.pk if run is not None else None
    params = [
        len(items),
        *bump_values,
        conversation.pk,
        len(items),
        conversation.pk,
        run_id,
        # One JSON document, as the fenced appends send theirs (``_call_params``).
        json.dumps([{"type": type, "payload": payload} for type, payload in items]),
    ]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        rows = sorted(cursor.fetchall(), key=lambda row: row[1])
    if not rows:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} no longer exists")
    conversation.last_seq = rows[-1][1]
    return [
        RunEvent(
            pk=event_id,
            conversation=conversation,
            run=run,
            seq=seq,
            type=type,
            payload=payload,
            created_at=created_at,
        )
        for (event_id, seq, created_at), (type, payload) in zip(rows, items, strict=True)
    ]


def conversation_bump_sql(
    assign: Mapping[str, Any], computed: Mapping[str, str] | None = None
) -> tuple[str, list[Any]]:
    """``UPDATE`` of the conversation adding ``%s`` to ``last_seq``, setting ``assign``, for
    the row ``id = %s``; and the values of ``assign`` (the two ``%s`` are the caller's).
    ``computed`` maps a field's name to an SQL expression of the caller's statement (a new
    row's id from one of its CTEs), written in place of a value."""
    quote = connection.ops.quote_name
    table = quote(Conversation._meta.db_table)
    column = quote(str(Conversation._meta.get_field("last_seq").column))
    key = quote(str(Conversation._meta.pk.column))
    sets = [f"{column} = {column} + %s"]
    values: list[Any] = []
    for name, value in assign.items():
        field = cast("models.Field[Any, Any]", Conversation._meta.get_field(name))
        sets.append(f"{quote(str(field.column))} = %s")
        values.append(field.get_db_prep_save(value, connection))
    for name, expression in (computed or {}).items():
        field = cast("models.Field[Any, Any]", Conversation._meta.get_field(name))
        sets.append(f"{quote(str(field.column))} = {expression}")
    return f"UPDATE {table} SET {', '.join(sets)} WHERE {key} = %s", values  # noqa: S608


def _bump_seq(conversation_id: int, *, by: int, assign: Mapping[str, Any]) -> int:
    """Add ``by`` to the conversation's ``last_seq`` and read it back in one statement,
    setting the fields in ``assign`` too.

    Every stored event goes through here, so the ORM's UPDATE-then-SELECT cost a second round
    trip per append; ``UPDATE ... RETURNING`` (PostgreSQL, SQLite 3.35+) locks the row the same
    way. Raises ``Conversation.DoesNotExist`` if the conversation was deleted.
    """
    bump, values = conversation_bump_sql(assign)
    column = connection.ops.quote_name(str(Conversation._meta.get_field("last_seq").column))
    # Only quoted names from the model's own metadata are formatted in; values are parameters.
    with prepared_cursor() as cursor:
        cursor.execute(f"{bump} RETURNING {column}", [by, *values, conversation_id])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id} no longer exists")
    return int(row[0])


# --------------------------------------------------------------------------------------
# Claiming and keeping a run
# --------------------------------------------------------------------------------------


def _stale_before() -> Any:
    return timezone.now() - timedelta(seconds=settings.AGENT_HEARTBEAT_STALE_SECONDS)


class Claim(NamedTuple):
    """A run taken by ``run_claim_with_tools``, the tool rows read with it, and its
    ``run.started`` if the claim announced the attempt."""

    run: AgentRun
    # The enabled tools among its profile version's, in no order (None: not read with the
    # claim; ``agents.runtime.snapshot_tool_configs`` reads them).
    tool_configs: list[ToolConfig] | None
    # Stored (and published once committed) by the claim's own statement on PostgreSQL; None
    # elsewhere, and for an attempt ``run_execute`` fails at once (too many attempts, no
    # profile version), which is never announced.
    started: RunEvent | None = None


def run_claim(*, run_id: int, worker_id: str) -> AgentRun | None:
    """Take the run for this worker, or None if it is finished or a live worker holds it.

    One conditional UPDATE decides: two workers racing for the same run cannot both win,
    because the loser's WHERE is re-checked against the winner's fresh heartbeat. The run
    comes back with what it starts with: its conversation and owner (the run's tools act for
    them), its question, its profile version and its model endpoint.
    """
    claim = run_claim_with_tools(run_id=run_id, worker_id=worker_id, announce=False)
    return claim.run if claim is not None else None


def run_claim_with_tools(*, run_id: int, worker_id: str, announce: bool) -> Claim | None:
    """``run_claim``, with its tool rows read in the same statement on PostgreSQL; with
    ``announce``, that statement also stores the attempt's ``run.started`` (``Claim.started``)
    unless the attempt is one ``run_execute`` fails before it starts."""
    if _fenced_sql_available():
        return _claim_and_read(run_id, worker_id, announce=announce)
    now = timezone.now()
    claimed = (
        AgentRun.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES)
        .filter(Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=_stale_before()))
        .update(
            status=Status.RUNNING,
            worker_id=worker_id,
            heartbeat_at=now,
            attempts=F("attempts") + 1,
            # The first attempt's claim is when the run started; later ones keep it.
            started_at=Coalesce(F("started_at"), Value(now)),
        )
    )
    if not claimed:
        return None
    return Claim(AgentRun.objects.select_related(*_CLAIM_READS).get(pk=run_id), None)


# What a claimed run starts with, read with it. The run's endpoint is its version's
# (``_queue_run``), so ``build_executor`` need not read it again.
_CLAIM_READS = ("conversation__owner", "trigger_message", "profile_version", "model_config")


def _claim_and_read(run_id: int, worker_id: str, *, announce: bool) -> Claim | None:
    """``run_claim`` on PostgreSQL as one statement: the UPDATE in a CTE, the rows of
    ``_CLAIM_READS`` joined to the row it returns, and the enabled tools its profile version
    names (one row per tool, the run's columns repeated), which took a statement of their own.
    With ``announce``, the attempt's ``run.started`` is stored in the same statement (the
    conversation's seq bumped, the event inserted, as ``_append_fenced`` does), unless
    ``run_execute`` will fail the attempt before it starts: more attempts than
    ``AGENT_MAX_ATTEMPTS`` allows, or no profile version. Its own statement after the claim
    cost every run a round trip and a commit.

    Plain SQL: the ORM's UPDATE and its five-table ``select_related`` cost a worker 2.9 ms of
    CPU per claim, most of it building the queries; this statement costs 1.0 ms
    (docs/performance.md, "A ninth round").
    """
    models_read = _claim_models()
    now = timezone.now()
    sql = _claim_sql(connection.vendor)
    params = {
        "running": Status.RUNNING.value,
        "holder": worker_id,
        "now": now,
        "run": run_id,
        "active": [str(status) for status in ACTIVE_STATUSES],
        "stale": _stale_before(),
        "announce": announce,
        "max_attempts": settings.AGENT_MAX_ATTEMPTS,
        "started": FrameType.RUN_STARTED.value,
    }
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    if not found:
        return None
    run, conversation, owner, question, version, endpoint = instances(models_read, found[0])
    _cache_related(Conversation, "owner", conversation, owner)
    related = zip(_CLAIM_READS, (conversation, question, version, endpoint), strict=True)
    for path, value in related:
        _cache_related(AgentRun, path.split("__")[0], run, value)
    # The tool's columns follow the others (a run without tools has one row, its tool NULL),
    # then the announcement's four (NULL if none).
    first_tool_column = sum(len(model._meta.concrete_fields) for model in models_read)
    tools = [instance(ToolConfig, row[first_tool_column:-4]) for row in found]
    started = _claim_started(cast(AgentRun, run), found[0][-4:])
    tool_configs = [cast(ToolConfig, tool) for tool in tools if tool]
    return Claim(cast(AgentRun, run), tool_configs, started)


@functools.cache
def _claim_models() -> tuple[type[models.Model], ...]:
    """The models whose rows a claim reads, in the order of its columns (then the tool's)."""
    return (AgentRun, Conversation, get_user_model(), Message, PromptVersion, ModelConfig)


@functools.cache
def _claim_sql(vendor: str) -> str:
    """``_claim_and_read``'s statement for the database ``vendor``, built once: it names every
    column of seven models, and a worker claims once per run."""
    quote = connection.ops.quote_name
    models_read = _claim_models()
    aliases = ("r", "c", "u", "m", "v", "e")
    selected = ", ".join(
        column
        for model, alias in zip(models_read, aliases, strict=True)
        for column in columns(model, alias)
    )
    selected += ", " + ", ".join(columns(ToolConfig, "t"))
    tables = [quote(model._meta.db_table) for model in models_read]
    tables.append(quote(ToolConfig._meta.db_table))
    events_table = quote(RunEvent._meta.db_table)
    # The first attempt's claim is when the run started; later ones keep it.
    return f"""
WITH r AS (
    UPDATE {tables[0]}
    SET status = %(running)s, worker_id = %(holder)s, heartbeat_at = %(now)s,
        attempts = attempts + 1, started_at = COALESCE(started_at, %(now)s)
    WHERE id = %(run)s AND status = ANY(%(active)s)
        AND (heartbeat_at IS NULL OR heartbeat_at < %(stale)s)
    RETURNING *
), announced AS (
    SELECT r.id, r.conversation_id, jsonb_build_object(
        'attempt', r.attempts, 'model', r.model_name,
        'profile', CASE WHEN jsonb_typeof(pv.snapshot -> 'slug') = 'string'
            THEN pv.snapshot ->> 'slug' ELSE '' END,
        'trigger_message_id', r.trigger_message_id) AS payload
    FROM r JOIN {tables[4]} AS pv ON pv.id = r.profile_version_id
    WHERE %(announce)s AND r.attempts - r.resumes <= %(max_attempts)s
), bumped AS (
    UPDATE {tables[1]} SET last_seq = last_seq + 1
    WHERE id = (SELECT conversation_id FROM announced)
    RETURNING last_seq
), started AS (
    INSERT INTO {events_table} (conversation_id, run_id, seq, type, payload, created_at)
    SELECT a.conversation_id, a.id, bumped.last_seq, %(started)s, a.payload, now()
    FROM announced AS a, bumped
    RETURNING id, seq, payload, created_at
)
SELECT {selected}, started.id, started.seq, started.payload, started.created_at FROM r
LEFT JOIN started ON true
JOIN {tables[1]} AS c ON c.id = r.conversation_id
JOIN {tables[2]} AS u ON u.id = c.owner_id
LEFT JOIN {tables[3]} AS m ON m.id = r.trigger_message_id
LEFT JOIN {tables[4]} AS v ON v.id = r.profile_version_id
LEFT JOIN {tables[5]} AS e ON e.id = r.model_config_id
LEFT JOIN {tables[6]} AS t ON t.enabled AND t.id::text IN (
    -- Compared as text: a snapshot is JSON, and a malformed one must not fail the claim.
    SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(v.snapshot -> 'tool_ids') = 'array'
        THEN v.snapshot -> 'tool_ids' ELSE '[]'::jsonb END)
)
"""  # noqa: S608 (only table and column names are formatted in)


def _claim_started(run: AgentRun, returned: Sequence[Any]) -> RunEvent | None:
    """The ``run.started`` a claim stored (its id, seq, payload and time as the statement
    returned them), published once committed; None if it announced nothing."""
    event_id, seq, payload, created_at = returned
    if event_id is None:
        return None
    # Django's connections load jsonb as text (its JSONField decodes it).
    payload = json.loads(payload) if isinstance(payload, str) else payload
    # The conversation was read before the statement's own bump.
    run.conversation.last_seq = seq
    started = RunEvent(
        pk=event_id,
        conversation_id=run.conversation_id,
        run_id=run.pk,
        seq=seq,
        type=FrameType.RUN_STARTED.value,
        payload=payload,
        created_at=created_at,
    )
    events.publish_on_commit([started])
    return started


def _cache_related(model: type[models.Model], name: str, obj: Any, value: Any) -> None:
    """What ``select_related`` does: ``obj.name`` is ``value`` without a query."""
    field = cast("models.ForeignKey[Any, Any]", model._meta.get_field(name))
    field.set_cached_value(obj, value)


def run_enqueue_on_commit(*, run_id: int) -> None:
    """Queue the run's task once the current transaction commits (at once outside one): a
    worker must find the run row it is asked to claim."""

    def enqueue() -> None:
        from agents.tasks import run_execute  # the tasks module imports the services

        run_execute.delay(run_id)

    transaction.on_commit(enqueue)


def run_claim_refusal(*, run_id: int) -> str:
    """Why ``run_claim`` took nothing, for the log: the run's state as it is now."""
    row = (
        AgentRun.objects.filter(pk=run_id)
        .values("status", "worker_id", "heartbeat_at", "attempts")
        .first()
    )
    if row is None:
        return "no such run (deleted, or not committed yet)"
    fresh = row["heartbeat_at"] is not None and row["heartbeat_at"] >= _stale_before()
    return (
        f"status {row['status']}, holder {row['worker_id'] or '-'}, "
        f"heartbeat {'fresh' if fresh else 'stale or none'}, attempts {row['attempts']}"
    )


def run_heartbeat(*, run_ids: list[int], worker_id: str) -> set[int]:
    """Refresh the heartbeat of the runs this worker still holds; returns those ids."""
    if not run_ids:
        return set()
    if _fenced_sql_available():
        # The monitor beats for every run the process holds (hundreds under load): one
        # statement, the ids as one array parameter rather than one placeholder each.
        return _ids_returned(
            "UPDATE {table} SET heartbeat_at = %s WHERE id = ANY(%s) AND worker_id = %s "
            "AND status = %s RETURNING id",
            [timezone.now(), list(run_ids), worker_id, Status.RUNNING.value],
        )
    held = AgentRun.objects.filter(pk__in=run_ids, worker_id=worker_id, status=Status.RUNNING)
    ids = set(held.values_list("pk", flat=True))
    AgentRun.objects.filter(pk__in=ids, worker_id=worker_id).update(heartbeat_at=timezone.now())
    return ids


def runs_release(*, run_ids: list[int], worker_id: str) -> list[int]:
    """Hand back runs this worker holds (a warm shutdown): no holder and no heartbeat, so
    the next claim, by any worker, takes them at once. Returns the ids released.

    Each row is locked as a step write locks it: a step committed first is kept and resumed
    from; a step that comes after is refused as written by a worker that lost the run.
    """
    if not run_ids:
        return []
    with transaction.atomic():
        held = list(
            AgentRun.objects.select_for_update()
            .filter(pk__in=run_ids, worker_id=worker_id, status=Status.RUNNING)
            .values_list("pk", flat=True)
        )
        AgentRun.objects.filter(pk__in=held).update(worker_id="", heartbeat_at=None)
    return held


def runs_cancel_requested(*, run_ids: list[int]) -> set[int]:
    """Which of these runs a user asked to cancel."""
    if not run_ids:
        return set()
    if _fenced_sql_available():
        # Asked every AGENT_CANCEL_POLL_SECONDS for every run the process holds.
        return _ids_returned(
            "SELECT id FROM {table} WHERE id = ANY(%s) AND cancel_requested_at IS NOT NULL",
            [list(run_ids)],
        )
    return set(
        AgentRun.objects.filter(pk__in=run_ids, cancel_requested_at__isnull=False).values_list(
            "pk", flat=True
        )
    )


def _ids_returned(sql: str, params: list[Any]) -> set[int]:
    """The ids a statement on the runs table returns (``{table}`` is its quoted name)."""
    table = connection.ops.quote_name(AgentRun._meta.db_table)
    with prepared_cursor() as cursor:
        cursor.execute(sql.format(table=table), params)
        return {row[0] for row in cursor.fetchall()}


def run_started(
    *, run: AgentRun, model: str, profile: str, worker_id: str | None = None
) -> RunEvent:
    """Announce an attempt; a resumed run announces itself again with its attempt number."""
    payload = _started_payload(run, model, profile)
    if worker_id is not None and _fenced_sql_available():
        return _append_fenced(run, [], [(FrameType.RUN_STARTED, payload)], worker_id)[0]
    with transaction.atomic():
        _check_holder(run, worker_id)
        return event_append(
            conversation=run.conversation, run=run, type=FrameType.RUN_STARTED, payload=payload
        )


async def run_started_on_loop(
    *, run: AgentRun, model: str, profile: str, worker_id: str
) -> RunEvent:
    """``run_started`` for the run driver, from the process's event loop, as
    ``run_record_steps_on_loop`` stores steps. Only where ``loop_db.available()``."""
    items = [(FrameType.RUN_STARTED, _started_payload(run, model, profile))]
    return (await _append_fenced_on_loop(run, [], items, worker_id))[0]


def _started_payload(run: AgentRun, model: str, profile: str) -> dict[str, Any]:
    return run_started_payload(
        attempt=run.attempts,
        model=model,
        profile=profile,
        trigger_message_id=run.trigger_message_id,
    )


def run_stored_steps(*, run: AgentRun) -> list[dict[str, Any]]:
    """The payloads of the steps already stored for this run, in order (for resuming)."""
    # Approval requests and decisions are steps to the engine too (agents/services/approvals.py).
    kinds = (FrameType.STEP, FrameType.APPROVAL_REQUESTED, FrameType.APPROVAL_DECIDED)
    return list(run.events.filter(type__in=kinds).order_by("seq").values_list("payload", flat=True))


def run_prior_steps(*, run: AgentRun) -> list[Step]:
    """What a resumed attempt hands the engine: its model calls (for the iteration count and
    token totals; their prompts are left out) followed by the stored steps, in order."""
    calls = run.model_calls.order_by("index").defer("request_messages")
    records: list[Step] = [
        ModelCallRecord(
            index=call.index,
            messages=[],
            options=call.request_options,
            response_text=call.response_text,
            tool_calls=call.response_tool_calls,
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
            duration_ms=call.duration_ms,
            error=call.error,
        )
        for call in calls
    ]
    return records + [step_from_event(payload) for payload in run_stored_steps(run=run)]


# --------------------------------------------------------------------------------------
# Recording what the engine yields
# --------------------------------------------------------------------------------------


def _check_holder(run: AgentRun, worker_id: str | None) -> None:
    """Inside a transaction: lock the run row and make sure ``worker_id`` still holds it.

    A takeover (``run_claim``) updates the same row, so it waits for a step being written
    and reads it as a prior step, and every write the old holder tries after it is refused:
    two workers never both extend one run's log. ``None`` skips the check (not a worker).
    """
    if worker_id is None:
        return
    held = (
        AgentRun.objects.select_for_update()
        .filter(pk=run.pk, worker_id=worker_id, status=Status.RUNNING)
        .values_list("pk", flat=True)
        .first()
    )
    if held is None:
        raise RunLost(f"run {run.pk} is no longer held by {worker_id}")


def run_record_step(*, run: AgentRun, step: Step, worker_id: str | None = None) -> RunEvent:
    """Store a thought / action / observation / error step as a ``step`` event."""
    return run_record_steps(run=run, steps=[step], worker_id=worker_id)[0]


def run_record_model_call(
    *, run: AgentRun, record: ModelCallRecord, worker_id: str | None = None
) -> None:
    """Store one model request and response (not an event) and add its tokens to the run."""
    run_record_steps(run=run, steps=[record], worker_id=worker_id)


def run_record_steps(
    *, run: AgentRun, steps: Sequence[Step], worker_id: str | None = None
) -> list[RunEvent]:
    """Store steps that came out of the engine together, in one transaction.

    A model call's record and the steps parsed from its reply arrive with nothing to wait
    for between them, so the worker hands them over at once: one holder check, one seq bump,
    and one frame batch on the channel layer for all of them. Model call records become
    ``ModelCall`` rows; every other step a ``step`` event. Returns the events.
    """
    records = [step for step in steps if isinstance(step, ModelCallRecord)]
    if worker_id is not None and _fenced_sql_available():
        return _append_fenced(run, records, _step_items(steps), worker_id)
    calls = None
    with transaction.atomic():
        if records:
            calls = _store_model_calls(run, records, worker_id)
        else:
            _check_holder(run, worker_id)
        stored = _append_steps(run, steps)
    if calls is not None:
        _remember_calls(run, calls, worker_id)
    return stored


def _append_steps(run: AgentRun, steps: Sequence[Step]) -> list[RunEvent]:
    items = _step_items(steps)
    if not items:
        return []
    return events_append(conversation=run.conversation, run=run, items=items)


def _step_items(steps: Sequence[Step]) -> list[tuple[FrameType, dict[str, Any]]]:
    """The ``step`` events for ``steps``; model call records are rows, not events."""
    return [
        (FrameType.STEP, step_to_event(step))
        for step in steps
        if not isinstance(step, ModelCallRecord)
    ]


class _StoredCalls(NamedTuple):
    first_index: int
    call_count: int
    prompt_tokens: int
    completion_tokens: int


def _store_model_calls(
    run: AgentRun, records: Sequence[ModelCallRecord], worker_id: str | None
) -> _StoredCalls:
    """Insert the calls and add their tokens to the run.

    The token UPDATE, filtered on the holder, is also the holder check: it locks the run row
    only if this worker still holds the run, as ``_check_holder`` does, in one statement.
    """
    prompt = sum(record.prompt_tokens for record in records)
    completion = sum(record.completion_tokens for record in records)
    held = AgentRun.objects.filter(pk=run.pk)
    if worker_id is not None:
        held = held.filter(worker_id=worker_id, status=Status.RUNNING)
    updated = held.update(
        prompt_tokens=F("prompt_tokens") + prompt,
        completion_tokens=F("completion_tokens") + completion,
    )
    if not updated and worker_id is not None:
        raise RunLost(f"run {run.pk} is no longer held by {worker_id}")
    usage_record_run_tokens(run=run, prompt_tokens=prompt, completion_tokens=completion)
    first = _next_call_index(run, worker_id)
    ModelCall.objects.bulk_create(
        ModelCall(
            run=run,
            index=first + offset,
            request_messages=record.messages,
            request_options=record.options,
            response_text=record.response_text,
            response_tool_calls=record.tool_calls,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            duration_ms=record.duration_ms,
            error=record.error,
        )
        for offset, record in enumerate(records)
    )
    return _StoredCalls(first, len(records), prompt, completion)


def _remember_calls(run: AgentRun, calls: _StoredCalls, worker_id: str | None) -> None:
    """Once committed: what the stored calls changed, on the caller's copy of the run."""
    if worker_id is not None:
        # A cache on this worker's copy of the row, not a field.
        run._next_call_index = calls.first_index + calls.call_count  # type: ignore[attr-defined]
    run.prompt_tokens += calls.prompt_tokens
    run.completion_tokens += calls.completion_tokens


def _next_call_index(run: AgentRun, worker_id: str | None) -> int:
    """The index of the run's next model call.

    A resumed attempt numbers its calls from zero again, so the first call of an attempt
    continues from the stored ones. After that the holder is the only writer of the run's
    calls (fenced above), so it counts on: one query per attempt rather than per call.
    """
    if worker_id is not None and getattr(run, "_next_call_index", None) is not None:
        return int(run._next_call_index)  # type: ignore[attr-defined]
    last = run.model_calls.aggregate(last=Max("index"))["last"]
    return 0 if last is None else last + 1


def _fenced_sql_available() -> bool:
    """The one-statement append needs PostgreSQL (data-modifying CTEs, arrays); SQLite, the
    embedded default, takes the ORM path with the same guarantees."""
    return connection.vendor == "postgresql"


def _append_fenced(
    run: AgentRun,
    records: Sequence[ModelCallRecord],
    items: Sequence[tuple[str, dict[str, Any]]],
    worker_id: str,
) -> list[RunEvent]:
    """Store model calls and events of a run as one statement, fenced on the holder.

    One round trip and one commit per model reply or observation instead of five to eight:
    the UPDATE of the run row (tokens, heartbeat) matches only while ``worker_id`` holds the
    run and locks the row until commit, exactly as ``_check_holder`` does, so a takeover
    waits for this write and reads it as a prior step; the calls are numbered on from the
    stored ones; ``last_seq`` is bumped under the conversation's row lock and the events
    take the seqs it returns. Nothing is written unless the holder matched (``RunLost``).
    Outside a transaction it is its own commit; inside one it joins it.
    """
    params = _fenced_params(run, _call_params(records), items, worker_id)
    with prepared_cursor() as cursor:
        cursor.execute(_fenced_append_sql(), params)
        rows = cursor.fetchall()
    appended = _fenced_appended(run, items, params, rows, worker_id)
    events.publish_on_commit(appended)
    return appended


async def run_record_steps_on_loop(
    *, run: AgentRun, steps: Sequence[Step], worker_id: str
) -> list[RunEvent]:
    """``run_record_steps`` for the run driver, from the process's event loop: the same one
    fenced statement (``_append_fenced``), sent on the loop's own connection
    (``agents/loop_db.py``), committed when it returns, then published. Only where
    ``loop_db.available()``."""
    records = [step for step in steps if isinstance(step, ModelCallRecord)]
    return await _append_fenced_on_loop(run, records, _step_items(steps), worker_id)


async def _append_fenced_on_loop(
    run: AgentRun,
    records: Sequence[ModelCallRecord],
    items: Sequence[tuple[str, dict[str, Any]]],
    worker_id: str,
) -> list[RunEvent]:
    """``_append_fenced`` on the loop's own connection, committed when it returns."""
    params = _fenced_params(run, _call_params(records), items, worker_id)
    rows = await loop_db.fetch_all(_fenced_append_sql(), params)
    appended = _fenced_appended(run, items, params, rows, worker_id)
    events.publish_committed(appended)
    return appended


def _fenced_params(
    run: AgentRun,
    calls: dict[str, Any],
    items: Sequence[tuple[str, dict[str, Any]]],
    worker_id: str,
) -> dict[str, Any]:
    """``calls``: the model calls' parameters (``_call_params``)."""
    return {
        **calls,
        "run": run.pk,
        "conv": run.conversation_id,
        "holder": worker_id,
        "running": Status.RUNNING.value,
        "n": len(items),
        "events": json.dumps([{"type": type, "payload": payload} for type, payload in items]),
    }


def _fenced_appended(
    run: AgentRun,
    items: Sequence[tuple[str, dict[str, Any]]],
    params: dict[str, Any],
    rows: Sequence[tuple[Any, ...]],
    worker_id: str,
) -> list[RunEvent]:
    """The events a fenced append stored, from the rows it returned; ``RunLost`` if the
    holder did not match (and nothing was written)."""
    if not rows or not rows[0][0]:
        raise RunLost(f"run {run.pk} is no longer held by {worker_id}")
    run.prompt_tokens += params["prompt"]
    run.completion_tokens += params["completion"]
    if items:
        run.conversation.last_seq = rows[-1][2]
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
        for (_, event_id, seq, created_at), (type, payload) in zip(
            (row for row in rows if row[1] is not None), items, strict=True
        )
    ]


def _call_params(records: Sequence[ModelCallRecord]) -> dict[str, Any]:
    """The calls as one JSON document: an array parameter of JSON texts is escaped element by
    element (a regular expression per quote, in Python), one text parameter in C."""
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
    }


def _ledger_cte() -> str:
    """``ledger``: add the calls' tokens to the run's usage ledger entry (agents/services/
    usage.py), in the same statement as the run's own totals, so the daily quota sees every
    token a fenced write stores. A data-modifying CTE runs whether or not it is read."""
    quote = connection.ops.quote_name
    return f"""ledger AS (
    UPDATE {quote(UsageEntry._meta.db_table)}
    SET prompt_tokens = prompt_tokens + %(prompt)s,
        completion_tokens = completion_tokens + %(completion)s
    WHERE run_id = (SELECT id FROM held) AND (%(prompt)s > 0 OR %(completion)s > 0)
    RETURNING id
)"""  # noqa: S608


def _calls_cte() -> str:
    """``calls``: insert the model calls in the parameters for the run ``held`` returned,
    numbered on from the run's stored calls."""
    quote = connection.ops.quote_name
    table = quote(ModelCall._meta.db_table)
    index = quote("index")
    return f"""calls AS (
    INSERT INTO {table} (run_id, {index}, request_messages, request_options,
        response_text, response_tool_calls, prompt_tokens, completion_tokens, duration_ms,
        error, created_at)
    SELECT held.id, numbering.next + call.ord - 1, call.doc -> 'messages',
        call.doc -> 'options', call.doc ->> 'text', call.doc -> 'tools',
        (call.doc ->> 'prompt')::int, (call.doc ->> 'completion')::int,
        (call.doc ->> 'ms')::int, call.doc ->> 'error', now()
    FROM held,
        (SELECT coalesce(max({index}) + 1, 0) AS next
         FROM {table} WHERE run_id = %(run)s) AS numbering,
        jsonb_array_elements(%(calls)s::jsonb) WITH ORDINALITY AS call(doc, ord)
)"""  # noqa: S608


@functools.cache
def _fenced_append_sql() -> str:
    quote = connection.ops.quote_name

    def table(model: type[models.Model]) -> str:
        return quote(model._meta.db_table)

    # Only names from the models' own metadata are formatted in; values are parameters.
    return f"""
WITH held AS (
    UPDATE {table(AgentRun)}
    SET prompt_tokens = prompt_tokens + %(prompt)s,
        completion_tokens = completion_tokens + %(completion)s,
        heartbeat_at = now()
    WHERE id = %(run)s AND worker_id = %(holder)s AND status = %(running)s
    RETURNING id
), {_calls_cte()}, {_ledger_cte()}, bumped AS (
    UPDATE {table(Conversation)} SET last_seq = last_seq + %(n)s
    WHERE id = %(conv)s AND %(n)s > 0 AND EXISTS (SELECT 1 FROM held)
    RETURNING last_seq - %(n)s AS base
), appended AS (
    INSERT INTO {table(RunEvent)} (conversation_id, run_id, seq, type, payload, created_at)
    SELECT %(conv)s, %(run)s, bumped.base + event.ord, event.doc ->> 'type',
        event.doc -> 'payload', now()
    FROM bumped, jsonb_array_elements(%(events)s::jsonb) WITH ORDINALITY AS event(doc, ord)
    RETURNING id, seq, created_at
)
SELECT (SELECT count(*) FROM held), appended.id, appended.seq, appended.created_at
FROM (SELECT 1) AS one LEFT JOIN appended ON true
ORDER BY appended.seq
"""  # noqa: S608


# --------------------------------------------------------------------------------------
# How a run ends
# --------------------------------------------------------------------------------------


def _lock_active(run: AgentRun, worker_id: str | None) -> AgentRun | None:
    """Lock the run row; None if it already ended (a cancel or another worker got there),
    was deleted with its conversation, or another worker holds it now."""
    locked = AgentRun.objects.select_for_update().filter(pk=run.pk).first()
    if locked is None or locked.is_terminal:
        return None
    if worker_id is not None and locked.worker_id != worker_id:
        return None
    return locked


def _save_answer(run: AgentRun, text: str) -> Message:
    message = Message.objects.create(
        conversation_id=run.conversation_id,
        role=Message.Role.ASSISTANT,
        content=text,
        run=run,
        parent_id=run.trigger_message_id,
    )
    _answer_take_place(run, message)
    return message


def _answer_take_place(run: AgentRun, message: Message) -> None:
    """The answer is a child of its question. It ends the active branch if the owner still
    looks at that question; if they switched to another branch meanwhile, it waits as a
    sibling version (agents/services/branches.py)."""
    moved = Conversation.objects.filter(
        pk=run.conversation_id, active_leaf_id=run.trigger_message_id
    ).update(active_leaf_id=message.pk)
    if not moved:
        Message.objects.filter(pk=message.pk).update(on_active_branch=False)
        message.on_active_branch = False


def _end(run: AgentRun, locked: AgentRun, status: str, **fields: Any) -> None:
    now = timezone.now()
    fields.update(status=status, finished_at=now, heartbeat_at=None)
    AgentRun.objects.filter(pk=run.pk).update(**fields)
    for name, value in fields.items():
        setattr(run, name, value)
    run.prompt_tokens = locked.prompt_tokens
    run.completion_tokens = locked.completion_tokens


def run_finish(
    *,
    run: AgentRun,
    step: FinalAnswerStep,
    worker_id: str | None = None,
    preceding: Sequence[Step] = (),
) -> Message | None:
    """Save the answer as the assistant message and end the run as succeeded.

    ``preceding`` are steps the engine yielded from the same reply just before the answer
    (that model call's record, a thought); they are stored in the same transaction, so the
    run's last steps and its end are one commit and one frame batch. Returns None (and writes
    nothing) if the run had already ended.
    """
    records = [item for item in preceding if isinstance(item, ModelCallRecord)]
    if worker_id is not None and _fenced_sql_available():
        return _finish_fenced(run, step, records, preceding, worker_id)
    with transaction.atomic():
        locked = _lock_active(run, worker_id)
        if locked is None:
            return None
        if records:
            calls = _store_model_calls(run, records, worker_id)
            locked.prompt_tokens += calls.prompt_tokens
            locked.completion_tokens += calls.completion_tokens
        message = _save_answer(run, step.text)
        _end(run, locked, Status.SUCCEEDED)
        _append_finished(run, message, step, preceding)
    return message


def _append_finished(
    run: AgentRun, message: Message, step: FinalAnswerStep, preceding: Sequence[Step]
) -> None:
    """The last reply's steps and ``run.finished``, inside the transaction that ends the run."""
    finished = run_finished_payload(run=run, message=message, stop_reason=step.stop_reason)
    events_append(
        conversation=run.conversation,
        run=run,
        items=[*_step_items(preceding), (FrameType.RUN_FINISHED, finished)],
    )


def _finish_fenced(
    run: AgentRun,
    step: FinalAnswerStep,
    records: Sequence[ModelCallRecord],
    preceding: Sequence[Step],
    worker_id: str,
) -> Message | None:
    """``run_finish`` on PostgreSQL as one statement with its own commit (``_finish_sql``)."""
    params, items, answer = _finish_params(run, step, records, preceding, worker_id)
    with prepared_cursor() as cursor:
        cursor.execute(_finish_sql(), params)
        rows = cursor.fetchall()
    return _finished(run, params, items, answer, rows, publish=events.publish_on_commit)


async def run_finish_on_loop(
    *,
    run: AgentRun,
    step: FinalAnswerStep,
    worker_id: str,
    preceding: Sequence[Step] = (),
) -> Message | None:
    """``run_finish`` for the run driver, from the process's event loop: the same one
    statement, on the loop's own connection (``agents/loop_db.py``), published when it
    returns. Only where ``loop_db.available()``."""
    records = [item for item in preceding if isinstance(item, ModelCallRecord)]
    params, items, answer = _finish_params(run, step, records, preceding, worker_id)
    rows = await loop_db.fetch_all(_finish_sql(), params)
    return _finished(run, params, items, answer, rows, publish=events.publish_committed)


def _finish_params(
    run: AgentRun,
    step: FinalAnswerStep,
    records: Sequence[ModelCallRecord],
    preceding: Sequence[Step],
    worker_id: str,
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]], Message]:
    """The statement's parameters, the events it stores (the last reply's steps, then
    ``run.finished``) and the answer; the answer's id, drawn by the statement, is None in
    both until then."""
    now = timezone.now()
    calls = _call_params(records)
    # The totals as the statement leaves them: only the holder adds to them, and this
    # process has added every one it stored since the claim read them.
    ended = copy.copy(run)
    ended.prompt_tokens = run.prompt_tokens + calls["prompt"]
    ended.completion_tokens = run.completion_tokens + calls["completion"]
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
        *_step_items(preceding),
        (FrameType.RUN_FINISHED, finished),
    ]
    params = {
        **_fenced_params(run, calls, items, worker_id),
        "succeeded": Status.SUCCEEDED.value,
        "now": now,
        "answer": step.text,
        "role": Message.Role.ASSISTANT.value,
        "question": run.trigger_message_id,
        "finished_type": FrameType.RUN_FINISHED.value,
    }
    return params, items, answer


def _finished(
    run: AgentRun,
    params: dict[str, Any],
    items: Sequence[tuple[str, dict[str, Any]]],
    answer: Message,
    rows: Sequence[tuple[Any, ...]],
    publish: Callable[[Sequence[RunEvent]], None],
) -> Message | None:
    """The answer ``_finish_sql`` stored, the run as it left it, its events published; None
    if the run had ended meanwhile (a cancel, the hard limit) or was taken over: then
    nothing was written."""
    if not rows or not rows[0][0]:
        return None
    answer.pk, answer.on_active_branch, started_at = rows[0][1:4]
    finished = items[-1][1]
    finished["message"]["id"] = answer.pk
    run.prompt_tokens += params["prompt"]
    run.completion_tokens += params["completion"]
    run.status, run.finished_at, run.heartbeat_at = Status.SUCCEEDED, params["now"], None
    run.started_at = started_at
    run.conversation.last_seq = rows[-1][5]
    stored = [
        RunEvent(
            pk=event_id,
            conversation_id=run.conversation_id,
            run_id=run.pk,
            seq=seq,
            type=type,
            payload=payload,
            created_at=created_at,
        )
        for (*_, event_id, seq, created_at), (type, payload) in zip(rows, items, strict=True)
    ]
    publish(stored)
    return answer


@functools.cache
def _finish_sql() -> str:
    """The run's end in one statement: fenced on the holder as every step is, the last
    reply's calls, the usage ledger, the answer (a child of its question, and the end of
    the active branch if the owner still looks at that question; otherwise a sibling
    version, agents/services/branches.py), the seq bump and the events, the answer's id
    written into ``run.finished``. The answer's id is drawn first, so the conversation's one
    UPDATE can both move the branch to it and bump the seq."""
    quote = connection.ops.quote_name
    run_table = quote(AgentRun._meta.db_table)
    message_table = Message._meta.db_table
    return f"""
WITH held AS (
    UPDATE {run_table}
    SET prompt_tokens = prompt_tokens + %(prompt)s,
        completion_tokens = completion_tokens + %(completion)s,
        status = %(succeeded)s, finished_at = %(now)s, heartbeat_at = NULL
    WHERE id = %(run)s AND worker_id = %(holder)s AND status = %(running)s
    RETURNING id, started_at
), {_calls_cte()}, {_ledger_cte()}, answer_id AS (
    SELECT nextval(pg_get_serial_sequence('{message_table}', 'id')) AS id FROM held
), bumped AS (
    UPDATE {quote(Conversation._meta.db_table)} AS conversation
    SET last_seq = last_seq + %(n)s,
        active_leaf_id = CASE
            WHEN conversation.active_leaf_id IS NOT DISTINCT FROM %(question)s
            THEN answer_id.id ELSE conversation.active_leaf_id END
    FROM answer_id
    WHERE conversation.id = %(conv)s
    RETURNING last_seq - %(n)s AS base,
        conversation.active_leaf_id IS NOT DISTINCT FROM answer_id.id AS moved
), answer AS (
    INSERT INTO {quote(message_table)}
        (id, conversation_id, role, content, client_id, run_id, parent_id, on_active_branch,
         created_at)
    SELECT answer_id.id, %(conv)s, %(role)s, %(answer)s, NULL, %(run)s, %(question)s,
        bumped.moved, %(now)s
    FROM answer_id, bumped
    RETURNING id
), appended AS (
    INSERT INTO {quote(RunEvent._meta.db_table)}
        (conversation_id, run_id, seq, type, payload, created_at)
    SELECT %(conv)s, %(run)s, bumped.base + event.ord, event.doc ->> 'type',
        CASE WHEN event.doc ->> 'type' = %(finished_type)s
             THEN jsonb_set(event.doc -> 'payload', '{{message,id}}', to_jsonb(answer_id.id))
             ELSE event.doc -> 'payload' END,
        now()
    FROM bumped, answer_id,
        jsonb_array_elements(%(events)s::jsonb) WITH ORDINALITY AS event(doc, ord)
    RETURNING id, seq, created_at
)
SELECT held.id, answer_id.id, bumped.moved, held.started_at,
    appended.id, appended.seq, appended.created_at
FROM held, answer_id, bumped, appended
ORDER BY appended.seq
"""  # noqa: S608


def run_fail(
    *, run: AgentRun, code: str, message: str, detail: str = "", worker_id: str | None = None
) -> bool:
    """End the run as failed with an error the user sees (and a ``detail`` only staff see);
    False if it had already ended."""
    with transaction.atomic():
        locked = _lock_active(run, worker_id)
        if locked is None:
            return False
        _end(
            run,
            locked,
            Status.FAILED,
            error_code=code[:64],
            error_message=message,
            error_detail=detail,
        )
        event_append(
            conversation=run.conversation,
            run=run,
            type=FrameType.RUN_FAILED,
            payload=run_failed_payload(code=code, message=message),
        )
    return True


def run_mark_cancelled(
    *, run: AgentRun, partial_answer: str = "", worker_id: str | None = None
) -> bool:
    """End the run as cancelled, keeping any partial answer as the assistant message."""
    with transaction.atomic():
        locked = _lock_active(run, worker_id)
        if locked is None:
            return False
        message = _save_answer(run, partial_answer) if partial_answer.strip() else None
        _end(run, locked, Status.CANCELLED)
        event_append(
            conversation=run.conversation,
            run=run,
            type=FrameType.RUN_CANCELLED,
            payload=run_cancelled_payload(partial_answer=partial_answer, message=message),
        )
    return True


# --------------------------------------------------------------------------------------
# Recovery
# --------------------------------------------------------------------------------------


def runs_needing_rescue(*, queued_for_seconds: float) -> list[int]:
    """Runs no live worker holds: running with a stale heartbeat, or queued for too long.

    A queued run this old most likely lost its broker message; enqueuing it again is safe
    because claiming is conditional.
    """
    queued_before = timezone.now() - timedelta(seconds=queued_for_seconds)
    stale = Q(status=Status.RUNNING) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=_stale_before())
    )
    lost = Q(status=Status.QUEUED, created_at__lt=queued_before) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=_stale_before())
    )
    return list(AgentRun.objects.filter(stale | lost).order_by("pk").values_list("pk", flat=True))
