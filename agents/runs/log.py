"""A conversation's event log: events appended with the next ``seq``, published after commit.

Used by every writer of a conversation's events that holds no run (a send, an approval's
decision, a cancel) and by the portable run store. The run store's fenced writes on
PostgreSQL append inside their own statement (``agents/db/statements.py``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from django.db import connection, models, transaction
from django.db.models import F
from psycopg import sql

from agents import events
from agents.db import statements
from agents.models import AgentRun, Conversation, RunEvent
from agents.protocol import FrameType
from chatsite.server.db.prepared import prepared_cursor


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
    the same UPDATE as the bump. Raises ``Conversation.DoesNotExist`` if the conversation
    was deleted.

    Called inside a caller's transaction it adds no savepoint: an error here rolls back the
    caller's whole transaction, which is what every caller does.
    """
    assign = dict(conversation_fields or {})
    with transaction.atomic(savepoint=False):
        if items and statements.fenced_statements_supported():
            appended = _append_in_one_statement(conversation, run, items, assign)
        else:
            appended = _append_with_orm(conversation, run, items, assign)
        events.publish_on_commit(appended)
    return appended


def _append_with_orm(
    conversation: Conversation,
    run: AgentRun | None,
    items: Sequence[tuple[FrameType, dict[str, Any]]],
    assign: dict[str, Any],
) -> list[RunEvent]:
    """The bump (the UPDATE locks the row until commit), its result read back, the events
    inserted with the seqs it made room for."""
    bumped = Conversation.objects.filter(pk=conversation.pk).update(
        last_seq=F("last_seq") + len(items), **assign
    )
    if not bumped:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} no longer exists")
    last = Conversation.objects.filter(pk=conversation.pk).values_list("last_seq", flat=True)[0]
    conversation.last_seq = last
    first = last - len(items) + 1
    return RunEvent.objects.bulk_create(
        RunEvent(conversation=conversation, run=run, seq=first + offset, type=type, payload=payload)
        for offset, (type, payload) in enumerate(items)
    )


def _append_in_one_statement(
    conversation: Conversation,
    run: AgentRun | None,
    items: Sequence[tuple[FrameType, dict[str, Any]]],
    assign: dict[str, Any],
) -> list[RunEvent]:
    """The bump and the events' insert as one statement (``statements.events_append``)."""
    params: dict[str, Any] = {
        "conv": conversation.pk,
        "run": run.pk if run is not None else None,
        "n": len(items),
        "events": json.dumps([{"type": type, "payload": payload} for type, payload in items]),
    }
    for name, value in assign.items():
        field = cast("models.Field[Any, Any]", Conversation._meta.get_field(name))
        params[name] = field.get_db_prep_save(value, connection)
    with prepared_cursor() as cursor:
        cursor.execute(statements.events_append(tuple(sorted(assign))), params)
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
    """The send's ``UPDATE`` of the conversation (agents/services/conversations.py), with
    positional parameters: ``%s`` added to ``last_seq``, the fields of ``assign`` set, the
    fields of ``computed`` set to the caller's SQL expressions, for the row ``id = %s``;
    and the values of ``assign``. Built from ``statements.conversation_bump``."""
    text = _bump_text(tuple(assign), tuple((computed or {}).items()))
    values = []
    for name, value in assign.items():
        field = cast("models.Field[Any, Any]", Conversation._meta.get_field(name))
        values.append(field.get_db_prep_save(value, connection))
    return text, values


@functools.cache
def _bump_text(names: tuple[str, ...], computed: tuple[tuple[str, str], ...]) -> str:
    """``conversation_bump_sql``'s statement, composed once per shape: every send runs one,
    and composing it again cost more than binding its values."""
    bump = statements.conversation_bump(
        # The caller's own expressions, over its statement's CTEs.
        names,
        tuple((name, sql.SQL(expression)) for name, expression in computed),
    )
    # The statement's named placeholders in order: ``n``, the assigned fields, ``conv``.
    positional = {"n": "%s", "conv": "%s", **{name: "%s" for name in names}}
    return bump.as_string(None) % positional
