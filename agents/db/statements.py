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
from typing import Any, Literal

from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from psycopg import sql

from agents.models import (
    AgentProfile,
    AgentRun,
    Attachment,
    Conversation,
    EvalResult,
    KnowledgeChunk,
    KnowledgeDocument,
    Message,
    ModelCall,
    ModelConfig,
    Notification,
    NotificationPreference,
    PromptVersion,
    RunEvent,
    ScheduleFiring,
    ToolConfig,
    UsageBudget,
    UsageEntry,
    UserPreference,
    Webhook,
)

# Which full-text search a database has: PostgreSQL's tsvector (through Django's
# ``django.contrib.postgres.search``), or SQLite's FTS5 table kept beside the chunks.
FullTextSearch = Literal["tsvector", "fts5"]


def fenced_statements_supported() -> bool:
    """Whether the one-statement writes (data-modifying CTEs over jsonb and arrays: the run
    store's and a send's) run here. Django names no such feature, so it is derived from the
    vendor, once, in this module: PostgreSQL has them; SQLite, the embedded default, takes
    the ORM."""
    return connection.vendor == "postgresql"


def full_text_search() -> FullTextSearch | None:
    """The full-text search the knowledge base uses here, or None where it has none."""
    return _FULL_TEXT_SEARCH.get(connection.vendor)


_FULL_TEXT_SEARCH: dict[str, FullTextSearch] = {"postgresql": "tsvector", "sqlite": "fts5"}


def storage_parameters_supported(db: BaseDatabaseWrapper) -> bool:
    """Whether a table takes storage parameters (``ALTER TABLE ... SET (fillfactor = ...)``):
    PostgreSQL's do; SQLite has none. ``db``: the connection a migration runs on."""
    return db.vendor == "postgresql"


def text(statement: sql.Composable) -> str:
    """A composed statement as the text Django's cursors take (its SQLite cursor rewrites
    ``%s`` in a string; psycopg's own takes either). Quoting names needs no connection, and
    psycopg's double quotes are SQLite's too."""
    return statement.as_string(None)


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
    return text(
        sql.SQL("WITH bumped AS ({bump}) {insert}").format(
            bump=bump,
            insert=_event_insert(values, sql.SQL("bumped, {}").format(_EVENTS_OF_DOCUMENT)),
        )
    )


def conversation_bump(
    assigned: tuple[str, ...], computed: tuple[tuple[str, sql.Composable], ...] = ()
) -> sql.Composed:
    """The ``UPDATE`` of a conversation adding ``%(n)s`` to ``last_seq`` for the row
    ``id = %(conv)s``, setting each field of ``assigned`` from the parameter of its name and
    each of ``computed`` to its expression (a new row's id, from a CTE of the caller's
    statement). For a statement that bumps the seq as one of its steps (a send)."""
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
    return sql.SQL(
        "held AS (UPDATE {table} SET prompt_tokens = prompt_tokens + %(prompt)s, "
        "completion_tokens = completion_tokens + %(completion)s, {sets} "
        "WHERE id = %(run)s AND worker_id = %(holder)s AND status = %(running)s "
        "RETURNING id, conversation_id, model_config_id, profile_version_id, created_at, "
        "started_at)"
    ).format(table=table(AgentRun), sets=sets)


def _calls() -> sql.Composed:
    """``calls``: the model calls of ``%(calls)s`` (a JSON array) inserted for the run
    ``held`` returned, numbered on from its stored calls."""
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
    """``ledger`` and ``ledger_created``: the calls' tokens added to the run's usage entry,
    or, if the run has none (a run queued before the ledger existed), the entry created, as
    ``usage_record_run_tokens`` (agents/services/usage.py) does: for the conversation's
    owner, counted on the day the run was created; nothing if the conversation is gone or
    no call is stored. The contract tests hold the two to the same entry.

    The update comes first, as there: a send writes every run's entry, so the insertion
    (its joins, its conflict check) runs only for the rare run without one (its
    ``NOT EXISTS`` is decided once, before any row is read)."""
    return sql.SQL(
        "ledger AS (UPDATE {table} SET prompt_tokens = prompt_tokens + %(prompt)s, "
        "completion_tokens = completion_tokens + %(completion)s "
        "WHERE run_id = (SELECT id FROM held) AND jsonb_array_length(%(calls)s::jsonb) > 0 "
        "RETURNING id), "
        "ledger_created AS (INSERT INTO {table} AS entry (user_id, kind, run_id, "
        "conversation_id, model_config_id, profile_id, prompt_price_per_million, "
        "completion_price_per_million, reserved_tokens, prompt_tokens, completion_tokens, "
        "created_at) "
        "SELECT conversation.owner_id, %(ledger_kind)s, held.id, held.conversation_id, "
        "held.model_config_id, version.profile_id, "
        "coalesce(endpoint.prompt_price_per_million, 0), "
        "coalesce(endpoint.completion_price_per_million, 0), 0, %(prompt)s, %(completion)s, "
        "held.created_at "
        "FROM held JOIN {conversations} AS conversation ON conversation.id = "
        "held.conversation_id LEFT JOIN {endpoints} AS endpoint ON endpoint.id = "
        "held.model_config_id LEFT JOIN {versions} AS version ON version.id = "
        "held.profile_version_id WHERE jsonb_array_length(%(calls)s::jsonb) > 0 "
        "AND NOT EXISTS (SELECT 1 FROM ledger) "
        # Another writer's entry made meanwhile is added to, not duplicated.
        "ON CONFLICT (run_id) DO UPDATE SET "
        "prompt_tokens = entry.prompt_tokens + EXCLUDED.prompt_tokens, "
        "completion_tokens = entry.completion_tokens + EXCLUDED.completion_tokens "
        "RETURNING entry.id)"
    ).format(
        table=table(UsageEntry),
        conversations=table(Conversation),
        endpoints=table(ModelConfig),
        versions=table(PromptVersion),
    )


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
    bump = sql.SQL(
        "bumped AS (UPDATE {table} SET last_seq = last_seq + %(n)s "
        "WHERE id = %(conv)s AND %(n)s > 0 AND EXISTS (SELECT 1 FROM held) "
        "RETURNING last_seq - %(n)s AS base)"
    ).format(table=table(Conversation))
    values = _event_from_document(sql.SQL("%(conv)s"), sql.SQL("%(run)s"))
    return text(
        sql.SQL(
            "WITH {held}, {calls}, {ledger}, {bump}, appended AS ({insert}) "
            "SELECT (SELECT count(*) FROM held), appended.id, appended.seq, "
            "appended.created_at FROM (SELECT 1) AS one LEFT JOIN appended ON true "
            "ORDER BY appended.seq"
        ).format(
            held=_held(sql.SQL("heartbeat_at = now()")),
            calls=_calls(),
            ledger=_ledger(),
            bump=bump,
            insert=_event_insert(values, sql.SQL("bumped, {}").format(_EVENTS_OF_DOCUMENT)),
        )
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
    return text(
        sql.SQL(
            "WITH {held}, {calls}, {ledger}, {answer_id}, {bump}, {answer}, "
            "appended AS ({insert}) "
            "SELECT held.id, answer_id.id, bumped.moved, held.started_at, "
            "appended.id, appended.seq, appended.created_at "
            "FROM held, answer_id, bumped, appended ORDER BY appended.seq"
        ).format(
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
    ``max_attempts``, ``started`` (the event's type) and ``ready`` (a file's state once read).
    Returns the columns of ``models_read`` (aliases ``CLAIM_ALIASES``) and of ``ToolConfig``,
    one row per enabled tool of the profile version (one row with the tool NULL if none),
    then the run's ``StartInputs`` in their order (agents/runs/base.py: each is its
    selector's query, and tests/runs/test_store_contract.py holds the two alike), then
    ``run.started``'s ``id, seq, payload, created_at`` (NULL if not announced); no row if
    the run is not claimable (ended, or a live worker's heartbeat is fresh).
    Fences the claim itself: one conditional UPDATE, re-checked against a racing winner's
    fresh heartbeat, so two claims never both win. No ``run.started`` for an attempt the
    caller fails at once (more than ``max_attempts``, or no profile version). The caller
    publishes ``run.started`` once it commits.
    """
    inputs = sql.SQL(
        "(SELECT f.{budget_steps} FROM {firings} AS f WHERE f.{firing_run} = r.id), "
        "COALESCE((SELECT p.{instructions} FROM {preferences} AS p "
        "WHERE p.{preference_user} = c.owner_id), ''), "
        "EXISTS (SELECT 1 FROM {attachments} AS a "
        "WHERE a.{attachment_conversation} = r.conversation_id AND a.{state} = %(ready)s)"
    ).format(
        budget_steps=_column(ScheduleFiring, "budget_steps"),
        firings=table(ScheduleFiring),
        firing_run=_column(ScheduleFiring, "run"),
        instructions=_column(UserPreference, "custom_instructions"),
        preferences=table(UserPreference),
        preference_user=_column(UserPreference, "user"),
        attachments=table(Attachment),
        attachment_conversation=_column(Attachment, "conversation"),
        state=_column(Attachment, "state"),
    )
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
    return text(
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
            "'trigger_message_id', r.trigger_message_id) "
            # A sub-agent's run names its parent and the call (as ``started_payload``).
            "|| CASE WHEN r.parent_run_id IS NULL THEN '{{}}'::jsonb ELSE jsonb_build_object("
            "'parent_run_id', r.parent_run_id, 'parent_call_id', r.parent_call_id) END "
            "AS payload "
            "FROM r JOIN {versions} AS pv ON pv.id = r.profile_version_id "
            "WHERE %(announce)s AND r.attempts - r.resumes <= %(max_attempts)s), "
            "bumped AS (UPDATE {conversations} SET last_seq = last_seq + 1 "
            "WHERE id = (SELECT conversation_id FROM announced) RETURNING last_seq), "
            "started AS ({started}) "
            "SELECT {selected}, {inputs}, "
            "started.id, started.seq, started.payload, started.created_at "
            "FROM r LEFT JOIN started ON true "
            "JOIN {conversations} AS c ON c.id = r.conversation_id "
            "JOIN {users} AS u ON u.id = c.owner_id "
            "LEFT JOIN {messages} AS m ON m.id = r.trigger_message_id "
            "LEFT JOIN {versions} AS v ON v.id = r.profile_version_id "
            "LEFT JOIN {endpoints} AS e ON e.id = r.model_config_id "
            "LEFT JOIN {tools} AS t ON t.enabled AND t.id::text IN ("
            "SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(v.snapshot -> 'tool_ids') "
            "= 'array' THEN v.snapshot -> 'tool_ids' ELSE '[]'::jsonb END))"
        ).format(
            runs=table(AgentRun),
            conversations=table(Conversation),
            users=tables["u"],
            messages=tables["m"],
            versions=tables["v"],
            endpoints=tables["e"],
            tools=table(ToolConfig),
            started=started,
            selected=selected,
            inputs=inputs,
        )
    )


@functools.cache
def runs_heartbeat() -> str:
    """The heartbeat of the runs a worker still holds, refreshed.

    Parameters: ``now``, ``ids`` (an array of run ids), ``holder``, ``running``.
    Returns ``id`` of each run refreshed. Fences on the holder: a run another worker took,
    or that ended, is left alone (and missing from the rows). Publishes nothing.
    """
    return text(
        sql.SQL(
            "UPDATE {table} SET heartbeat_at = %(now)s WHERE id = ANY(%(ids)s) "
            "AND worker_id = %(holder)s AND status = %(running)s RETURNING id"
        ).format(table=table(AgentRun))
    )


@functools.cache
def runs_cancel_requested() -> str:
    """Which runs a user asked to cancel.

    Parameters: ``ids`` (an array of run ids). Returns ``id`` of each asked to cancel.
    Reads only: fences and publishes nothing.
    """
    return text(
        sql.SQL(
            "SELECT id FROM {table} WHERE id = ANY(%(ids)s) AND cancel_requested_at IS NOT NULL"
        ).format(table=table(AgentRun))
    )


@functools.cache
def row_insert(model: type[Model], computed: tuple[tuple[str, str], ...]) -> str:
    """``INSERT`` of one new row of ``model``, as ``agents.db.rows.insert`` sends it inside a
    caller's statement: every local concrete column but the automatic key, in field order.
    Parameters: one per column, except those ``computed`` (attname, SQL expression of the
    caller's statement, such as another row's new id from one of its CTEs, or ``NULL``)
    writes in place.
    Returns nothing; fences nothing; publishes nothing."""
    meta = model._meta
    expressions = dict(computed)
    names: list[sql.Composable] = []
    values: list[sql.Composable] = []
    for field in meta.local_concrete_fields:
        if field is meta.auto_field:
            continue
        names.append(sql.Identifier(str(field.column)))
        expression = expressions.get(field.attname)
        values.append(sql.SQL(expression) if expression is not None else sql.Placeholder())
    return text(
        sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            table(model), sql.SQL(", ").join(names), sql.SQL(", ").join(values)
        )
    )


# --------------------------------------------------------------------------------------
# A send and its reads (agents/services/conversations.py, agents/selectors.py)
# --------------------------------------------------------------------------------------
# Plain statements where the ORM cost more to build a query than to run it, on paths every
# send, socket connect or run takes. Each is built once and kept (functools.cache): joining
# the quoted names of several models' columns at every send would cost more than the ORM
# it replaces.


def conversation_last_seq() -> str:
    """The conversation's last seq, if the user owns it.

    Parameters: the conversation's id, the user's id. Returns ``last_seq`` (no row: not
    there, or not this user's). Fences nothing; publishes nothing.
    """
    return _conversation_last_seq()


@functools.cache
def _conversation_last_seq() -> str:
    return text(
        sql.SQL("SELECT last_seq FROM {} WHERE id = %s AND owner_id = %s").format(
            table(Conversation)
        )
    )


def events_after(names: tuple[str, ...]) -> str:
    """A page of a conversation's stored events after a seq, oldest first.

    ``names``: the ``RunEvent`` columns to read. Parameters: the conversation's id, the seq
    to read after, the page's size. Returns ``names``. Fences nothing; publishes nothing (a
    replay sends what it reads to one socket).
    """
    return _events_after(names)


@functools.cache
def _events_after(names: tuple[str, ...]) -> str:
    return text(
        sql.SQL(
            "SELECT {} FROM {} WHERE conversation_id = %s AND seq > %s ORDER BY seq LIMIT %s"
        ).format(_names(names), table(RunEvent))
    )


def branch(columns: tuple[str, ...]) -> str:
    """The messages from the first down to a leaf, oldest first: one recursive walk up the
    ``parent_id`` links, on PostgreSQL and SQLite alike.

    ``columns``: the ``Message`` columns to return. Parameters: the leaf's id, the
    conversation's id (a leaf of another conversation gives no rows). Returns ``columns``.
    Fences nothing; publishes nothing.
    """
    return _branch(columns)


@functools.cache
def _branch(columns: tuple[str, ...]) -> str:
    walked = tuple(dict.fromkeys(("id", "parent_id", *columns)))  # and the link it follows
    messages = table(Message)
    return text(
        sql.SQL(
            """WITH RECURSIVE branch({walked}) AS (
    SELECT {walked} FROM {messages} WHERE id = %s AND conversation_id = %s
    UNION ALL
    SELECT {joined} FROM {messages} AS m JOIN branch AS b ON m.id = b.parent_id
)
SELECT {wanted} FROM branch ORDER BY id"""
        ).format(
            walked=_names(walked),
            messages=messages,
            joined=sql.SQL(", ").join(sql.Identifier("m", name) for name in walked),
            wanted=_names(columns),
        )
    )


@functools.cache
def branch_newest_leaf() -> str:
    """The newest message below a message (itself if it has none): children are written
    after their parents, so the newest is a leaf.

    Parameters: the message's id, the conversation's id. Returns ``MAX(id)`` (NULL when the
    message is not in that conversation). Fences nothing; publishes nothing.
    """
    messages = table(Message)
    return text(
        sql.SQL(
            """WITH RECURSIVE below(id) AS (
    SELECT id FROM {messages} WHERE id = %s AND conversation_id = %s
    UNION ALL
    SELECT m.id FROM {messages} AS m JOIN below AS b ON m.parent_id = b.id
)
SELECT MAX(id) FROM below"""
        ).format(messages=messages)
    )


@functools.lru_cache(maxsize=64)
def tool_configs_enabled(count: int) -> str:
    """The enabled tools among ``count`` ids, in no particular order.

    Parameters: the ``count`` ids. Returns every ``ToolConfig`` column (``column_list``,
    which ``agents.db.rows.instance`` reads back). Fences nothing; publishes nothing.
    """
    return text(
        sql.SQL("SELECT {} FROM {} AS t WHERE t.id IN ({}) AND t.enabled").format(
            column_list(ToolConfig, "t"), table(ToolConfig), _placeholders(count)
        )
    )


# The four models whose columns, in this order, begin a row of ``conversation_lock``.
LOCKED_MODELS: tuple[type[Model], ...] = (Conversation, AgentProfile, ModelConfig, PromptVersion)


def conversation_lock(*, with_session: bool) -> str:
    """Lock the user's conversation row and read, in the same statement, what a send needs.

    Parameters: the user's id (for ``profile_allowed``), with ``with_session`` the two of
    ``session_columns``, then the conversation's id and the user's id.
    Returns one row (none: not there, or not the user's): every column of the conversation,
    of the profile a run would use (the conversation's, else ``default_profile_id``'s), of
    that profile's model endpoint and of its latest prompt version (``latest_version_id``),
    in ``LOCKED_MODELS`` order and NULL where there is none; then whether the user may use
    the profile (``profile_allowed``), its tools (``tools_by_name``), and with
    ``with_session`` the three of ``session_columns``.
    Fences: the conversation's row (``FOR UPDATE OF c`` where the database can; SQLite takes
    the write lock with the transaction, chatsite/settings.py). Publishes nothing.
    """
    return _conversation_lock(connection.vendor, with_session=with_session)


@functools.cache
def _conversation_lock(vendor: str, *, with_session: bool) -> str:
    selected = sql.SQL(", ").join(
        column_list(model, alias) for model, alias in zip(LOCKED_MODELS, "cpmv", strict=True)
    )
    session: sql.Composable = sql.SQL("")
    session_join: sql.Composable = sql.SQL("")
    if with_session:
        session = sql.SQL(", {}").format(session_columns(user_alias="u"))
        session_join = sql.SQL("JOIN {} AS u ON u.id = c.owner_id").format(table(User))
    lock = sql.SQL(" FOR UPDATE OF c" if connection.features.has_select_for_update_of else "")
    return text(
        sql.SQL(
            """SELECT {selected}, {allowed}, {tools}{session}
FROM {conversations} AS c
{session_join}
LEFT JOIN {profiles} AS p ON p.id = COALESCE(c.profile_id, {default_profile})
LEFT JOIN {endpoints} AS m ON m.id = p.model_config_id
LEFT JOIN {versions} AS v ON v.id = {latest_version}
WHERE c.id = %s AND c.owner_id = %s{lock}"""
        ).format(
            selected=selected,
            allowed=profile_allowed_expression(profile="p"),
            tools=tools_by_name(vendor, profile="p"),
            session=session,
            conversations=table(Conversation),
            session_join=session_join,
            profiles=table(AgentProfile),
            default_profile=default_profile_id(),
            endpoints=table(ModelConfig),
            versions=table(PromptVersion),
            latest_version=latest_version_id(profile="p"),
            lock=lock,
        )
    )


def default_profile_id() -> sql.Composed:
    """An expression: the default profile's id, or NULL. The rule is the Python one of
    ``agents.services.defaults.default_profile`` (at most one profile is the default, a
    constraint of the model); tests/db/test_profile_rules.py proves them equal."""
    return sql.SQL("(SELECT id FROM {} WHERE is_default LIMIT 1)").format(table(AgentProfile))


def latest_version_id(*, profile: str) -> sql.Composed:
    """An expression: the id of the live prompt version (highest ``number``, not a draft) of
    the profile aliased ``profile``, or NULL. The rule is ``prompt_version_live``'s;
    tests/db/test_profile_rules.py proves them equal."""
    return sql.SQL(
        "(SELECT id FROM {} WHERE profile_id = {} AND NOT is_draft ORDER BY number DESC LIMIT 1)"
    ).format(table(PromptVersion), sql.Identifier(profile, "id"))


def profile_allowed_expression(*, profile: str | None = None) -> sql.Composed:
    """An expression: whether the user (the first parameter) may use a profile, the one
    aliased ``profile`` or, without it, the one of the next two parameters (its id twice).

    The rule is ``agents.selectors.profiles_for_user``'s (open to all when it names no
    group, else to members of one of them); tests/db/test_profile_rules.py proves the two
    agree for every user, profile and group membership it builds.
    """
    profile_id = sql.Identifier(profile, "id") if profile else sql.Placeholder()
    return sql.SQL(
        """(EXISTS (
    SELECT 1 FROM {limits} AS allowed JOIN {memberships} AS member
    ON member.group_id = allowed.group_id
    WHERE member.user_id = %s AND allowed.agentprofile_id = {profile_id}
) OR NOT EXISTS (SELECT 1 FROM {limits} WHERE agentprofile_id = {profile_id}))"""
    ).format(
        limits=table(AgentProfile.allowed_groups.through),
        memberships=table(User.groups.through),
        profile_id=profile_id,
    )


@functools.cache
def profile_allowed() -> str:
    """Whether the user may use the profile (``profile_allowed_expression``).

    Parameters: the user's id, the profile's id twice. Returns one boolean. Fences nothing;
    publishes nothing.
    """
    return text(sql.SQL("SELECT {}").format(profile_allowed_expression()))


def tools_by_name(vendor: str, *, profile: str) -> sql.Composable:
    """An expression: the (id, name) pairs of the tools of the profile aliased ``profile``,
    ordered by name as ``agents.profile_snapshot`` orders them, as JSON text; NULL on a
    database that has neither dialect (``profile_snapshot`` then reads them itself)."""
    chosen = sql.SQL(
        """FROM {links} AS pt JOIN {tools} AS t ON t.id = pt.toolconfig_id
    WHERE pt.agentprofile_id = {profile_id}"""
    ).format(
        links=table(AgentProfile.tools.through),
        tools=table(ToolConfig),
        profile_id=sql.Identifier(profile, "id"),
    )
    if vendor == "postgresql":
        return sql.SQL(
            """COALESCE((SELECT json_agg(json_build_array(t.id, t.name) ORDER BY t.name)
    {})::text, '[]')"""
        ).format(chosen)
    if vendor == "sqlite":
        # No ORDER BY inside an aggregate before SQLite 3.44. An ordered subquery under an
        # aggregate is not flattened, so its rows reach json_group_array in order
        # (tests/db/test_profile_rules.py checks it against profile_snapshot's order).
        return sql.SQL(
            """(SELECT json_group_array(json_array(id, name)) FROM (
    SELECT t.id, t.name {} ORDER BY t.name))"""
        ).format(chosen)
    return sql.SQL("NULL")


def send_reads_under_lock(*, unfinished: int, client_id: bool, parent: bool) -> str:
    """What a send must know of the conversation's messages and runs, read after its row
    lock is taken (a statement that waited for the lock on PostgreSQL still reads with the
    snapshot it started with).

    Parameters: the conversation's id and the ``unfinished`` statuses that block a new run;
    with ``client_id``, the conversation's id and the client id; with ``parent``, the
    conversation's id and the parent message's id; then the user's id twice. Returns the
    status of the newest unfinished run (or NULL), then with ``client_id`` the id of the
    message already sent with it (or NULL), then with ``parent`` whether the parent is a
    message of the conversation, then whether a monthly budget applies to the user (their
    own or a group's: only then does the send read what the month used). Fences nothing
    (the caller holds ``conversation_lock``); publishes nothing.
    """
    return _send_reads_under_lock(unfinished, client_id, parent)


@functools.cache
def _send_reads_under_lock(unfinished: int, client_id: bool, parent: bool) -> str:
    messages = table(Message)
    reads = [
        sql.SQL(
            """(SELECT status FROM {} WHERE conversation_id = %s AND status IN ({})
    ORDER BY id DESC LIMIT 1)"""
        ).format(table(AgentRun), _placeholders(unfinished))
    ]
    if client_id:
        reads.append(
            sql.SQL(
                """(SELECT id FROM {} WHERE conversation_id = %s AND client_id = %s
    ORDER BY id LIMIT 1)"""
            ).format(messages)
        )
    if parent:
        reads.append(
            sql.SQL("EXISTS (SELECT 1 FROM {} WHERE conversation_id = %s AND id = %s)").format(
                messages
            )
        )
    reads.append(
        sql.SQL(
            "EXISTS (SELECT 1 FROM {budgets} WHERE user_id = %s OR group_id IN "
            "(SELECT group_id FROM {memberships} WHERE user_id = %s))"
        ).format(budgets=table(UsageBudget), memberships=table(User.groups.through))
    )
    return text(sql.SQL("SELECT {}").format(sql.SQL(", ").join(reads)))


@functools.cache  # composed once per shape of its pieces, not at every send
def send_continuing_active_branch(
    *, message_insert: str, run_insert: str, entry_insert: str, conversation_bump: str
) -> str:
    """The rest of a send that continues the active branch, as one statement (CTEs, each
    row taking the ids of those before); PostgreSQL only (``fenced_statements_supported``).

    The four pieces are the statements ``agents.db.rows.insert`` and the run store's
    conversation bump build from the models' metadata, whose computed columns read the
    CTEs: ``new_message``'s id for the run's trigger and the branch's new end,
    ``new_run``'s for the ledger entry and the event.
    Parameters: those of ``message_insert``, ``run_insert`` and ``entry_insert``, then those
    of ``conversation_bump`` (the seq step first), then the conversation's id, the event's
    type and its payload as JSON (``agents.protocol.message_created_payload``'s; only the
    message's id, unknown until the INSERT, is written into it here, at ``message.id``).
    Returns the new message's, run's, ledger entry's and event's ids, the event's seq and
    its ``created_at``.
    Fences: the conversation's row, through the bump (the caller holds
    ``conversation_lock``). The caller publishes ``message.created`` after commit and
    enqueues the run.
    """
    return text(
        sql.SQL(
            """WITH new_message AS ({message_insert} RETURNING id),
new_run AS ({run_insert} RETURNING id),
new_entry AS ({entry_insert} RETURNING id),
bumped AS ({conversation_bump} RETURNING last_seq),
appended AS (
    INSERT INTO {events} (conversation_id, run_id, seq, type, payload, created_at)
    SELECT %s, (SELECT id FROM new_run), bumped.last_seq, %s,
        jsonb_set(%s::jsonb, '{{message,id}}', to_jsonb((SELECT id FROM new_message))), now()
    FROM bumped
    RETURNING id, seq, created_at
)
SELECT (SELECT id FROM new_message), (SELECT id FROM new_run), (SELECT id FROM new_entry),
    appended.id, appended.seq, appended.created_at
FROM appended"""
        ).format(
            message_insert=sql.SQL(message_insert),
            run_insert=sql.SQL(run_insert),
            entry_insert=sql.SQL(entry_insert),
            conversation_bump=sql.SQL(conversation_bump),
            events=table(RunEvent),
        )
    )


# --------------------------------------------------------------------------------------
# A run's end (agents/services/execution.py ``_run_ended``)
# --------------------------------------------------------------------------------------
# Read once per run by the worker after its drive: through the ORM, compiling their
# subqueries cost the worker more than the run's stored steps (docs/performance.md#after-run).
# Portable SQL, the same text on PostgreSQL and SQLite.

# The run's columns ``ended_run`` returns first, as ``Model.from_db`` takes them.
ENDED_RUN_FIELDS = ("id", "conversation_id", "status", "attempts", "error_message")


@functools.cache
def ended_run() -> str:
    """The run as its drive ended, with which effects of its end can apply.

    Parameters: the run's id. Returns ``ENDED_RUN_FIELDS``, its conversation's
    ``owner_id``, the schedule whose firing started it (or NULL), three flags (whether any
    usage budget exists, whether the run has child runs, whether it replays an evaluation
    case), then the owner's reach as ``notification_reach`` returns it. No row: the run is
    gone. Fences nothing; publishes nothing.
    """
    return text(
        sql.SQL(
            """SELECT {run_fields}, c.owner_id,
    (SELECT f.schedule_id FROM {firings} AS f WHERE f.run_id = r.id LIMIT 1),
    EXISTS (SELECT 1 FROM {budgets}),
    EXISTS (SELECT 1 FROM {runs} AS child WHERE child.parent_run_id = r.id),
    EXISTS (SELECT 1 FROM {results} AS e WHERE e.run_id = r.id),
    {reach}
FROM {runs} AS r JOIN {conversations} AS c ON c.id = r.conversation_id
WHERE r.id = %s"""
        ).format(
            run_fields=sql.SQL(", ").join(
                sql.SQL("r.{}").format(_column(AgentRun, name)) for name in ENDED_RUN_FIELDS
            ),
            firings=table(ScheduleFiring),
            budgets=table(UsageBudget),
            runs=table(AgentRun),
            results=table(EvalResult),
            conversations=table(Conversation),
            reach=_reach_columns(sql.SQL("c.owner_id")),
        )
    )


@functools.cache
def notification_reach() -> str:
    """Who a new notification reaches, for one user, in one read.

    Parameters: the user's id, three times. Returns their unread count (the rule of
    ``agents.services.notifications._unread``, not yet read; the two counts are proved
    equal by tests/services/test_notifications.py), whether they have any webhook at all
    (the caller reads which apply only when one exists), and whether they asked for e-mail.
    Fences nothing; publishes nothing.
    """
    return text(sql.SQL("SELECT {}").format(_reach_columns(sql.Placeholder())))


def _reach_columns(user: sql.Composable) -> sql.Composed:
    """The three columns of a user's reach (``notification_reach``), ``user`` their id."""
    return sql.SQL(
        """(SELECT COUNT(*) FROM {notifications} WHERE user_id = {user} AND read_at IS NULL),
    EXISTS (SELECT 1 FROM {webhooks} WHERE owner_id = {user}),
    EXISTS (SELECT 1 FROM {preferences} WHERE user_id = {user} AND email)"""
    ).format(
        notifications=table(Notification),
        webhooks=table(Webhook),
        preferences=table(NotificationPreference),
        user=user,
    )


@functools.cache
def notification_insert(row: str) -> str:
    """A new notification, unless one with its key exists: ``row`` (the notification's
    ``INSERT``, as ``agents.db.rows.insert`` gives it) with ``ON CONFLICT (key) DO NOTHING``,
    the same text on PostgreSQL and SQLite.

    Parameters: those of ``row``. Returns the new row's id, or no row when the key was
    taken (the ending was notified already); a conflict raises nothing, so a caller's
    transaction goes on. Fences nothing; the caller publishes the notification once it
    commits.
    """
    return text(
        sql.SQL("{insert} ON CONFLICT ({key}) DO NOTHING RETURNING id").format(
            insert=sql.SQL(row), key=_column(Notification, "key")
        )
    )


# --------------------------------------------------------------------------------------
# Sockets' session checks (the socket session check)
# --------------------------------------------------------------------------------------
# The rows ``django.contrib.auth.get_user`` reads, in one statement; the decision is made
# from them in Python with Django's own pieces (tests/test_session_check.py proves every
# answer equal to ``get_user``'s).


def session_columns(*, user_alias: str) -> sql.Composed:
    """Columns for a statement that joins the user as ``user_alias``: the data of the
    unexpired session (or NULL), the user's password and ``is_active``.

    Parameters: the session's key and now (``session_check.signs_in_params``).
    """
    return sql.SQL(
        """(SELECT session_data FROM {sessions}
    WHERE session_key = %s AND expire_date > %s),
    {password}, {is_active}"""
    ).format(
        sessions=_sessions(),
        password=sql.Identifier(user_alias, "password"),
        is_active=sql.Identifier(user_alias, "is_active"),
    )


@functools.cache
def session_and_user() -> str:
    """The unexpired session's data with the user's password and ``is_active``.

    Parameters: the user's id, the session's key, now. Returns ``session_data``,
    ``password``, ``is_active`` (no row: no such session, expired, or no such user).
    Fences nothing; publishes nothing.
    """
    return _with_session(
        sql.SQL("u.password, u.is_active"),
        sql.SQL("JOIN {} AS u ON u.id = %s").format(table(User)),
    )


@functools.lru_cache(maxsize=4)
def session_and_owner(*, active: int) -> str:
    """The unexpired session's data, the conversation's owner, its last seq and whether a
    run of it is queued or running.

    Parameters: the ``active`` statuses, the conversation's id, the session's key, now.
    Returns ``session_data``, ``last_seq``, whether a run is active, then every ``User``
    column (``column_list``). Fences nothing; publishes nothing.
    """
    return _with_session(
        sql.SQL(
            """c.last_seq, EXISTS (SELECT 1 FROM {runs} AS r WHERE r.conversation_id = c.id
    AND r.status IN ({statuses})), {user}"""
        ).format(runs=table(AgentRun), statuses=_placeholders(active), user=column_list(User, "u")),
        sql.SQL("JOIN {} AS c ON c.id = %s JOIN {} AS u ON u.id = c.owner_id").format(
            table(Conversation), table(User)
        ),
    )


def _sessions() -> sql.Identifier:
    """The database session engine's table (imported only when a session is read here: a
    project on another engine need not install its model)."""
    return table(SessionStore.get_model_class())


def _with_session(select: sql.Composable, joins: sql.Composable) -> str:
    return text(
        sql.SQL(
            """SELECT s.session_data, {select} FROM {sessions} AS s {joins}
WHERE s.session_key = %s AND s.expire_date > %s"""
        ).format(select=select, sessions=_sessions(), joins=joins)
    )


# --------------------------------------------------------------------------------------
# The knowledge base's full-text index
# --------------------------------------------------------------------------------------
# On PostgreSQL the search is Django's own (``django.contrib.postgres.search``). On SQLite
# it reads an FTS5 table kept beside ``KnowledgeChunk`` (rowid = the chunk's id), created
# on first use rather than by a migration, so that test databases built without migrations
# have it too.

FTS5_TABLE = "agents_knowledgechunk_fts"


@functools.cache
def fts5_table_exists() -> str:
    """Parameters: none. Returns a row when the FTS5 table exists."""
    return text(
        sql.SQL("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = {}").format(
            sql.Literal(FTS5_TABLE)
        )
    )


@functools.cache
def fts5_table_create() -> str:
    """Parameters: none. Creates the FTS5 table (title and text, Porter stemming)."""
    return text(
        sql.SQL(
            "CREATE VIRTUAL TABLE IF NOT EXISTS {} "
            "USING fts5(title, text, tokenize = 'porter unicode61')"
        ).format(sql.Identifier(FTS5_TABLE))
    )


@functools.cache
def fts5_index_every_chunk() -> str:
    """Parameters: none. Indexes every stored chunk with its document's title."""
    return text(
        sql.SQL(
            """INSERT INTO {fts} (rowid, title, text)
SELECT c.id, d.title, c.text FROM {chunks} AS c JOIN {documents} AS d ON d.id = c.document_id"""
        ).format(
            fts=sql.Identifier(FTS5_TABLE),
            chunks=table(KnowledgeChunk),
            documents=table(KnowledgeDocument),
        )
    )


@functools.cache
def fts5_delete_chunk() -> str:
    """Parameters: the chunk's id. Removes its row from the index."""
    return text(sql.SQL("DELETE FROM {} WHERE rowid = %s").format(sql.Identifier(FTS5_TABLE)))


@functools.cache
def fts5_index_chunk() -> str:
    """Parameters: the chunk's id, its document's title, its text."""
    return text(
        sql.SQL("INSERT INTO {} (rowid, title, text) VALUES (%s, %s, %s)").format(
            sql.Identifier(FTS5_TABLE)
        )
    )


@functools.cache
def fts5_delete_orphans() -> str:
    """Parameters: none. Removes the rows of chunks deleted without the knowledge service
    (a cascade from the admin)."""
    return text(
        sql.SQL("DELETE FROM {} WHERE rowid NOT IN (SELECT id FROM {})").format(
            sql.Identifier(FTS5_TABLE), table(KnowledgeChunk)
        )
    )


@functools.cache
def fts5_search() -> str:
    """The best passages of a collection for an FTS5 query, best first (bm25: lower is
    better; the title weighs more than the passage).

    Parameters: the FTS5 match expression, the collection, the limit. Returns the chunk's
    id, then the document's id and title, the chunk's position and text, and the score
    (higher is better), as ``KnowledgeHit`` takes them. Fences nothing; publishes nothing.
    """
    fts = sql.Identifier(FTS5_TABLE)
    return text(
        sql.SQL(
            """SELECT c.id, d.id, d.title, c.position, c.text, -bm25({fts}, 5.0, 1.0) AS score
FROM {fts}
JOIN {chunks} AS c ON c.id = {fts}.rowid
JOIN {documents} AS d ON d.id = c.document_id
WHERE {fts} MATCH %s AND d.collection = %s
ORDER BY bm25({fts}, 5.0, 1.0), d.id, c.position
LIMIT %s"""
        ).format(fts=fts, chunks=table(KnowledgeChunk), documents=table(KnowledgeDocument))
    )


# --------------------------------------------------------------------------------------
# Composition helpers
# --------------------------------------------------------------------------------------


def _names(names: tuple[str, ...]) -> sql.Composed:
    return sql.SQL(", ").join(sql.Identifier(name) for name in names)


def _placeholders(count: int) -> sql.Composed:
    """``count`` parameters, comma-separated (an IN list)."""
    if count < 1:
        raise ValueError("an IN list needs at least one value")
    return sql.SQL(", ").join([sql.Placeholder()] * count)
