"""Every raw SQL statement of the project, and the database capabilities that choose them.

Statements are composed with ``psycopg.sql`` from the models' own metadata (tables and
column lists from ``_meta``), never with string formatting; values are always parameters.
Each statement has a header: its parameters, the columns it returns, what it fences, and
what the caller publishes once it commits.

Nothing else in the project tests which database it runs on: callers ask the capabilities
below, as Django's own code asks ``connection.features``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from django.db import connection
from django.db.models import Field, Model
from psycopg import sql


def fenced_statements_supported() -> bool:
    """Whether the run store's one-statement writes (data-modifying CTEs over jsonb and
    arrays) run here. Django names no such feature, so it is derived from the vendor, once,
    in this module: PostgreSQL has them; SQLite, the embedded default, takes the ORM."""
    return connection.vendor == "postgresql"


def table(model: type[Model]) -> sql.Identifier:
    """The model's table, quoted."""
    return sql.Identifier(model._meta.db_table)


def column_list(model: type[Model], alias: str | None = None) -> sql.Composed:
    """Every concrete column of ``model`` in field order, quoted (``alias.column`` with one)."""
    names = [str(field.column) for field in model._meta.concrete_fields]
    if alias is None:
        return sql.SQL(", ").join(sql.Identifier(name) for name in names)
    return sql.SQL(", ").join(sql.Identifier(alias, name) for name in names)


# --------------------------------------------------------------------------------------
# The run's life (agents/runs/): claim, record, finish
# --------------------------------------------------------------------------------------

# The statements of the PostgreSQL run store (agents/runs/postgres.py). Each is built once
# (``functools.cache``) and handed to the cursor as text, so psycopg prepares it once per
# connection; every value is a named parameter.


def _column(model: type[Model], name: str) -> sql.Identifier:
    field = model._meta.get_field(name)
    assert isinstance(field, Field), f"{model.__name__}.{name} is not a column"
    return sql.Identifier(str(field.column))


# What an event's insert returns unless told: what the caller needs to build its frame.
_EVENT_RETURNED = sql.SQL("id, seq, created_at")


def _event_insert(
    values: Mapping[str, sql.Composable],
    source: sql.Composable,
    returning: sql.Composable = _EVENT_RETURNED,
) -> sql.Composed:
    """``INSERT INTO`` the events' table: each column of ``RunEvent`` but its key, in field
    order, taking the expression ``values`` gives for its field, selected ``FROM source``.
    The one place a statement names the events' columns; a field added to the model and not
    given here fails at once, when the statement is built."""
    from agents.models import RunEvent

    fields = [field for field in RunEvent._meta.concrete_fields if not field.primary_key]
    missing = {field.name for field in fields} - set(values)
    if missing:
        raise ValueError(f"no value for the event's fields {sorted(missing)}")
    return sql.SQL(
        "INSERT INTO {table} ({columns}) SELECT {values} FROM {source} RETURNING {returning}"
    ).format(
        table=table(RunEvent),
        columns=sql.SQL(", ").join(sql.Identifier(str(field.column)) for field in fields),
        values=sql.SQL(", ").join(values[field.name] for field in fields),
        source=source,
        returning=returning,
    )


def _event_from_document(conversation: sql.Composable, run: sql.Composable) -> dict[str, Any]:
    """The events' values from ``event`` (a ``{"type", "payload"}`` document of the
    ``%(events)s`` array), numbered on from ``bumped.base``."""
    return {
        "conversation": conversation,
        "run": run,
        "seq": sql.SQL("bumped.base + event.ord"),
        "type": sql.SQL("event.doc ->> 'type'"),
        "payload": sql.SQL("event.doc -> 'payload'"),
        "created_at": sql.SQL("now()"),
    }


_EVENTS_OF_DOCUMENT = sql.SQL(
    "jsonb_array_elements(%(events)s::jsonb) WITH ORDINALITY AS event(doc, ord)"
)


@functools.cache
def events_append(assigned: tuple[str, ...]) -> str:
    """A conversation's events appended outside a run's fence (agents/runs/log.py).

    Parameters: ``conv`` (the conversation), ``run`` (or NULL), ``n`` (how many events),
    ``events`` (a JSON array of ``{"type", "payload"}``, in order), and one parameter named
    after each field in ``assigned``, written to the conversation in the same UPDATE.
    Returns ``id, seq, created_at`` per event; no row if the conversation is gone.
    Fences nothing: the conversation's row lock, held from the bump to commit, makes
    concurrent appends take turns, so ``seq`` goes up by one per event with no gap.
    The caller publishes the events once the transaction commits.
    """
    from agents.models import Conversation

    sets = [sql.SQL("{last} = {last} + %(n)s").format(last=_column(Conversation, "last_seq"))]
    sets += [
        sql.SQL("{column} = {value}").format(
            column=_column(Conversation, name), value=sql.Placeholder(name)
        )
        for name in assigned
    ]
    bump = sql.SQL(
        "UPDATE {table} SET {sets} WHERE id = %(conv)s RETURNING {last} - %(n)s AS base"
    ).format(
        table=table(Conversation),
        sets=sql.SQL(", ").join(sets),
        last=_column(Conversation, "last_seq"),
    )
    values = _event_from_document(sql.SQL("%(conv)s::bigint"), sql.SQL("%(run)s::bigint"))
    return (
        sql.SQL("WITH bumped AS ({bump}) {insert}")
        .format(
            bump=bump,
            insert=_event_insert(values, sql.SQL("bumped, {}").format(_EVENTS_OF_DOCUMENT)),
        )
        .as_string(None)
    )


def conversation_bump(
    assigned: tuple[str, ...], computed: tuple[tuple[str, sql.Composable], ...] = ()
) -> sql.Composed:
    """The ``UPDATE`` of a conversation adding ``%(n)s`` to ``last_seq`` for the row
    ``id = %(conv)s``, setting each field of ``assigned`` from the parameter of its name and
    each of ``computed`` to its expression (a new row's id, from a CTE of the caller's
    statement). For a statement that bumps the seq as one of its steps (a send)."""
    from agents.models import Conversation

    sets = [sql.SQL("{last} = {last} + %(n)s").format(last=_column(Conversation, "last_seq"))]
    sets += [
        sql.SQL("{} = {}").format(_column(Conversation, name), sql.Placeholder(name))
        for name in assigned
    ]
    sets += [
        sql.SQL("{} = {}").format(_column(Conversation, name), expression)
        for name, expression in computed
    ]
    return sql.SQL("UPDATE {table} SET {sets} WHERE id = %(conv)s").format(
        table=table(Conversation), sets=sql.SQL(", ").join(sets)
    )


def _held(sets: sql.Composable) -> sql.Composed:
    """``held``: the fence. The run's row, updated (``sets``, tokens added) only while
    ``%(holder)s`` holds it running, and locked by that UPDATE until commit: a takeover's
    claim waits for this write and reads it as a prior step, and every later write of the
    old holder matches nothing. Every other step of the statement reads ``held``, so
    nothing is written when it is empty."""
    from agents.models import AgentRun

    return sql.SQL(
        "held AS (UPDATE {table} SET prompt_tokens = prompt_tokens + %(prompt)s, "
        "completion_tokens = completion_tokens + %(completion)s, {sets} "
        "WHERE id = %(run)s AND worker_id = %(holder)s AND status = %(running)s "
        "RETURNING id, conversation_id, model_config_id, created_at, started_at)"
    ).format(table=table(AgentRun), sets=sets)


def _calls() -> sql.Composed:
    """``calls``: the model calls of ``%(calls)s`` (a JSON array) inserted for the run
    ``held`` returned, numbered on from its stored calls."""
    from agents.models import ModelCall

    return sql.SQL(
        "calls AS (INSERT INTO {table} (run_id, {index}, request_messages, request_options, "
        "response_text, response_tool_calls, prompt_tokens, completion_tokens, duration_ms, "
        "error, created_at) "
        "SELECT held.id, numbering.next + call.ord - 1, call.doc -> 'messages', "
        "call.doc -> 'options', call.doc ->> 'text', call.doc -> 'tools', "
        "(call.doc ->> 'prompt')::int, (call.doc ->> 'completion')::int, "
        "(call.doc ->> 'ms')::int, call.doc ->> 'error', now() "
        "FROM held, (SELECT coalesce(max({index}) + 1, 0) AS next FROM {table} "
        "WHERE run_id = %(run)s) AS numbering, "
        "jsonb_array_elements(%(calls)s::jsonb) WITH ORDINALITY AS call(doc, ord))"
    ).format(table=table(ModelCall), index=_column(ModelCall, "index"))


def _ledger() -> sql.Composed:
    """``ledger``: the calls' tokens added to the run's usage entry, which is created if the
    run has none (a run queued before the ledger existed), as ``usage_record_run_tokens``
    (agents/services/usage.py) does: for the conversation's owner, counted on the day the
    run was created; nothing if the conversation is gone or no call is stored. The contract
    tests hold the two to the same entry."""
    from agents.models import Conversation, UsageEntry

    return sql.SQL(
        "ledger AS (INSERT INTO {table} AS entry (user_id, kind, run_id, conversation_id, "
        "model_config_id, reserved_tokens, prompt_tokens, completion_tokens, created_at) "
        "SELECT conversation.owner_id, %(ledger_kind)s, held.id, held.conversation_id, "
        "held.model_config_id, 0, %(prompt)s, %(completion)s, held.created_at "
        "FROM held JOIN {conversations} AS conversation ON conversation.id = "
        "held.conversation_id WHERE jsonb_array_length(%(calls)s::jsonb) > 0 "
        "ON CONFLICT (run_id) DO UPDATE SET "
        "prompt_tokens = entry.prompt_tokens + EXCLUDED.prompt_tokens, "
        "completion_tokens = entry.completion_tokens + EXCLUDED.completion_tokens "
        "RETURNING entry.id)"
    ).format(table=table(UsageEntry), conversations=table(Conversation))


@functools.cache
def run_record() -> str:
    """A run's stored steps: the model calls and events of one reply (or an observation, or
    the attempt's ``run.started``), written by the worker that holds the run.

    Parameters: ``run``, ``conv``, ``holder``, ``running`` (the running status), ``prompt``
    and ``completion`` (the calls' tokens), ``calls`` (a JSON array of the calls),
    ``ledger_kind``, ``n`` and ``events`` (a JSON array of ``{"type", "payload"}``).
    Returns one row per event, ``held, id, seq, created_at`` (``held`` 0: nothing written,
    the caller raises ``RunLost``; one row with NULLs when no event was given).
    Fences on the holder (``held``); also beats the run's heartbeat. The caller publishes
    the events once the statement commits.
    """
    from agents.models import Conversation

    bump = sql.SQL(
        "bumped AS (UPDATE {table} SET last_seq = last_seq + %(n)s "
        "WHERE id = %(conv)s AND %(n)s > 0 AND EXISTS (SELECT 1 FROM held) "
        "RETURNING last_seq - %(n)s AS base)"
    ).format(table=table(Conversation))
    values = _event_from_document(sql.SQL("%(conv)s"), sql.SQL("%(run)s"))
    return (
        sql.SQL(
            "WITH {held}, {calls}, {ledger}, {bump}, appended AS ({insert}) "
            "SELECT (SELECT count(*) FROM held), appended.id, appended.seq, "
            "appended.created_at FROM (SELECT 1) AS one LEFT JOIN appended ON true "
            "ORDER BY appended.seq"
        )
        .format(
            held=_held(sql.SQL("heartbeat_at = now()")),
            calls=_calls(),
            ledger=_ledger(),
            bump=bump,
            insert=_event_insert(values, sql.SQL("bumped, {}").format(_EVENTS_OF_DOCUMENT)),
        )
        .as_string(None)
    )


@functools.cache
def run_finish() -> str:
    """A run's end with its answer: the last reply's calls and steps, the answer (a child of
    its question, and the end of the active branch if the owner still looks at that
    question, else a sibling version: agents/services/branches.py), the run succeeded, and
    the events with ``run.finished`` last, the answer's id written into it.

    Parameters: those of ``run_record``, and ``succeeded``, ``now``, ``answer`` (its text),
    ``role``, ``question`` (the run's question) and ``finished_type``.
    Returns one row per event: ``held, answer id, moved (the branch moved to it), the run's
    started_at, event id, seq, created_at``; no row if nothing was written.
    Fences on the holder (``held``). The caller publishes the events once it commits.
    """
    from agents.models import Conversation, Message

    message_table = Message._meta.db_table
    answer_id = sql.SQL(
        "answer_id AS (SELECT nextval(pg_get_serial_sequence({table}, 'id')) AS id FROM held)"
    ).format(table=sql.Literal(message_table))
    bump = sql.SQL(
        "bumped AS (UPDATE {table} AS conversation SET last_seq = last_seq + %(n)s, "
        "active_leaf_id = CASE WHEN conversation.active_leaf_id IS NOT DISTINCT FROM "
        "%(question)s THEN answer_id.id ELSE conversation.active_leaf_id END "
        "FROM answer_id WHERE conversation.id = %(conv)s "
        "RETURNING last_seq - %(n)s AS base, "
        "conversation.active_leaf_id IS NOT DISTINCT FROM answer_id.id AS moved)"
    ).format(table=table(Conversation))
    answer = sql.SQL(
        "answer AS (INSERT INTO {table} (id, conversation_id, role, content, client_id, run_id, "
        "parent_id, on_active_branch, created_at) SELECT answer_id.id, %(conv)s, %(role)s, "
        "%(answer)s, NULL, %(run)s, %(question)s, bumped.moved, %(now)s "
        "FROM answer_id, bumped RETURNING id)"
    ).format(table=table(Message))
    values = _event_from_document(sql.SQL("%(conv)s"), sql.SQL("%(run)s"))
    values["payload"] = sql.SQL(
        "CASE WHEN event.doc ->> 'type' = %(finished_type)s "
        "THEN jsonb_set(event.doc -> 'payload', '{message,id}', to_jsonb(answer_id.id)) "
        "ELSE event.doc -> 'payload' END"
    )
    return (
        sql.SQL(
            "WITH {held}, {calls}, {ledger}, {answer_id}, {bump}, {answer}, "
            "appended AS ({insert}) "
            "SELECT held.id, answer_id.id, bumped.moved, held.started_at, "
            "appended.id, appended.seq, appended.created_at "
            "FROM held, answer_id, bumped, appended ORDER BY appended.seq"
        )
        .format(
            held=_held(
                sql.SQL("status = %(succeeded)s, finished_at = %(now)s, heartbeat_at = NULL")
            ),
            calls=_calls(),
            ledger=_ledger(),
            answer_id=answer_id,
            bump=bump,
            answer=answer,
            insert=_event_insert(
                values, sql.SQL("bumped, answer_id, {}").format(_EVENTS_OF_DOCUMENT)
            ),
        )
        .as_string(None)
    )


# What a claim reads with the run, in the order of its columns: the run, its conversation
# and the conversation's owner, its question, its profile version, its model endpoint.
CLAIM_ALIASES = ("r", "c", "u", "m", "v", "e")


@functools.cache
def run_claim(models_read: tuple[type[Model], ...]) -> str:
    """A run taken for a worker, with what it starts with, and optionally its attempt's
    ``run.started``.

    Parameters: ``run``, ``holder``, ``now``, ``running``, ``active`` (the active statuses),
    ``stale`` (heartbeats before this are stale), ``announce`` (store ``run.started``),
    ``max_attempts`` and ``started`` (the event's type).
    Returns the columns of ``models_read`` (aliases ``CLAIM_ALIASES``) and of ``ToolConfig``,
    one row per enabled tool of the profile version (one row with the tool NULL if none),
    then ``run.started``'s ``id, seq, payload, created_at`` (NULL if not announced); no row
    if the run is not claimable (ended, or a live worker's heartbeat is fresh).
    Fences the claim itself: one conditional UPDATE, re-checked against a racing winner's
    fresh heartbeat, so two claims never both win. No ``run.started`` for an attempt the
    caller fails at once (more than ``max_attempts``, or no profile version). The caller
    publishes ``run.started`` once it commits.
    """
    from agents.models import AgentRun, Conversation, ToolConfig

    selected = sql.SQL(", ").join(
        [
            *(
                column_list(model, alias)
                for model, alias in zip(models_read, CLAIM_ALIASES, strict=True)
            ),
            column_list(ToolConfig, "t"),
        ]
    )
    tables = {alias: table(model) for model, alias in zip(models_read, CLAIM_ALIASES, strict=True)}
    values = {
        "conversation": sql.SQL("a.conversation_id"),
        "run": sql.SQL("a.id"),
        "seq": sql.SQL("bumped.last_seq"),
        "type": sql.SQL("%(started)s"),
        "payload": sql.SQL("a.payload"),
        "created_at": sql.SQL("now()"),
    }
    started = _event_insert(
        values, sql.SQL("announced AS a, bumped"), sql.SQL("id, seq, payload, created_at")
    )
    # The first attempt's claim is when the run started; later ones keep it. The tool ids
    # are compared as text: a snapshot is JSON, and a malformed one must not fail the claim.
    return (
        sql.SQL(
            "WITH r AS (UPDATE {runs} SET status = %(running)s, worker_id = %(holder)s, "
            "heartbeat_at = %(now)s, attempts = attempts + 1, "
            "started_at = COALESCE(started_at, %(now)s) "
            "WHERE id = %(run)s AND status = ANY(%(active)s) "
            "AND (heartbeat_at IS NULL OR heartbeat_at < %(stale)s) RETURNING *), "
            "announced AS (SELECT r.id, r.conversation_id, jsonb_build_object("
            "'attempt', r.attempts, 'model', r.model_name, "
            "'profile', CASE WHEN jsonb_typeof(pv.snapshot -> 'slug') = 'string' "
            "THEN pv.snapshot ->> 'slug' ELSE '' END, "
            "'trigger_message_id', r.trigger_message_id) AS payload "
            "FROM r JOIN {versions} AS pv ON pv.id = r.profile_version_id "
            "WHERE %(announce)s AND r.attempts - r.resumes <= %(max_attempts)s), "
            "bumped AS (UPDATE {conversations} SET last_seq = last_seq + 1 "
            "WHERE id = (SELECT conversation_id FROM announced) RETURNING last_seq), "
            "started AS ({started}) "
            "SELECT {selected}, started.id, started.seq, started.payload, started.created_at "
            "FROM r LEFT JOIN started ON true "
            "JOIN {conversations} AS c ON c.id = r.conversation_id "
            "JOIN {users} AS u ON u.id = c.owner_id "
            "LEFT JOIN {messages} AS m ON m.id = r.trigger_message_id "
            "LEFT JOIN {versions} AS v ON v.id = r.profile_version_id "
            "LEFT JOIN {endpoints} AS e ON e.id = r.model_config_id "
            "LEFT JOIN {tools} AS t ON t.enabled AND t.id::text IN ("
            "SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(v.snapshot -> 'tool_ids') "
            "= 'array' THEN v.snapshot -> 'tool_ids' ELSE '[]'::jsonb END))"
        )
        .format(
            runs=table(AgentRun),
            conversations=table(Conversation),
            users=tables["u"],
            messages=tables["m"],
            versions=tables["v"],
            endpoints=tables["e"],
            tools=table(ToolConfig),
            started=started,
            selected=selected,
        )
        .as_string(None)
    )


@functools.cache
def runs_heartbeat() -> str:
    """The heartbeat of the runs a worker still holds, refreshed.

    Parameters: ``now``, ``ids`` (an array of run ids), ``holder``, ``running``.
    Returns ``id`` of each run refreshed. Fences on the holder: a run another worker took,
    or that ended, is left alone (and missing from the rows). Publishes nothing.
    """
    from agents.models import AgentRun

    return (
        sql.SQL(
            "UPDATE {table} SET heartbeat_at = %(now)s WHERE id = ANY(%(ids)s) "
            "AND worker_id = %(holder)s AND status = %(running)s RETURNING id"
        )
        .format(table=table(AgentRun))
        .as_string(None)
    )


@functools.cache
def runs_cancel_requested() -> str:
    """Which runs a user asked to cancel.

    Parameters: ``ids`` (an array of run ids). Returns ``id`` of each asked to cancel.
    Reads only: fences and publishes nothing.
    """
    from agents.models import AgentRun

    return (
        sql.SQL(
            "SELECT id FROM {table} WHERE id = ANY(%(ids)s) AND cancel_requested_at IS NOT NULL"
        )
        .format(table=table(AgentRun))
        .as_string(None)
    )


# --------------------------------------------------------------------------------------
# A send and its reads (agents/services/conversations.py, agents/selectors.py)
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# Sockets' session checks (the socket session check)
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# The knowledge base's full-text index
# --------------------------------------------------------------------------------------
