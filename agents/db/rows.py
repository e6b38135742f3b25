"""Rows read and written with plain SQL, converted as the ORM converts them.

For the few statements on a socket's hot path (every send, connect and replay) where
building the query through the ORM costs several times what running it does
(docs/performance.md#replay-rows). Values read go through the same converters
the ORM applies (JSON, dates and booleans on SQLite, decimals), so what comes back is what a
queryset would give; values written are prepared as the ORM's INSERT prepares them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model

from agents.db import statements

Converter = Callable[[Any], Any]

_converters: dict[tuple[str, type[Model], str], Converter] = {}


def _backend(db: Any) -> str:
    """Which backend ``db`` is, as a key of the caches below: the ORM converts values by
    backend, so a converter or a quoted name worked out for one is not another's."""
    return type(db.ops).__module__


def column_converter(model: type[Model], attname: str) -> Converter:
    """What the ORM does to a value of ``model.attname`` read from the database."""
    key = (_backend(connection), model, attname)
    found = _converters.get(key)
    if found is None:
        steps, column = _conversion(model, attname)

        def found(value: Any, steps: list[Any] = steps, column: Any = column) -> Any:
            for step in steps:
                value = step(value, column, connection)
            return value

        _converters[key] = found
    return found


def columns(model: type[Model], alias: str) -> tuple[str, ...]:
    """``alias.column`` for each of the model's concrete fields, quoted, in field order."""
    return _columns(_backend(connection), model, alias)


@functools.cache
def _columns(backend: str, model: type[Model], alias: str) -> tuple[str, ...]:
    # Worked out once: a claim reads six models' columns, and quoting every name at every
    # claim cost more than converting the row it reads.
    quote = connection.ops.quote_name
    return tuple(f"{alias}.{quote(str(field.column))}" for field in model._meta.concrete_fields)


def instance(model: type[Model], values: Sequence[Any]) -> Model | None:
    """A model instance from the values of ``columns(model, …)``; None for the missing side of
    an outer join (its primary key is NULL)."""
    if values[0] is None:
        return None
    db = connections[DEFAULT_DB_ALIAS]
    attnames, converters = _row_shape(_backend(db), model)
    converted = [
        value if convert is None else convert(value)
        for convert, value in zip(converters, values, strict=True)
    ]
    return model.from_db(db.alias, attnames, converted)


_shapes: dict[tuple[str, type[Model]], tuple[list[str], list[Converter | None]]] = {}


def _row_shape(backend: str, model: type[Model]) -> tuple[list[str], list[Converter | None]]:
    """The model's attnames in field order and each one's converter (None: the value is
    used as read). Worked out once per model: a claim or a send's lock reads dozens of
    columns, and finding each converter again cost more than converting."""
    shape = _shapes.get((backend, model))
    if shape is None:
        fields = model._meta.concrete_fields
        attnames = [field.attname for field in fields]
        converters: list[Converter | None] = [
            column_converter(model, name) if _conversion(model, name)[0] else None
            for name in attnames
        ]
        shape = _shapes[(backend, model)] = (attnames, converters)
    return shape


def _conversion(model: type[Model], attname: str) -> tuple[list[Any], Any]:
    """The ORM's converters for a column of the model, and the column they are given."""
    field = next(f for f in model._meta.concrete_fields if f.attname == attname)
    column = field.get_col(model._meta.db_table)
    return connection.ops.get_db_converters(column) + column.get_db_converters(connection), column


def instances(models: Sequence[type[Model]], row: Sequence[Any]) -> list[Model | None]:
    """One instance per model from a row of their ``columns(...)`` side by side, in order
    (None for the missing side of an outer join)."""
    found: list[Model | None] = []
    start = 0
    for model in models:
        end = start + len(model._meta.concrete_fields)
        found.append(instance(model, row[start:end]))
        start = end
    return found


class StoredEvent(NamedTuple):
    """What a stored event's frame is built from (``agents.protocol.event_frame``), as a
    replay reads it: the same fields a ``RunEvent`` has, without the model instance."""

    type: str
    seq: int
    run_id: int | None
    created_at: datetime
    payload: dict[str, Any]


def insert(instance: Model, *, computed: dict[str, str] | None = None) -> tuple[str, list[Any]]:
    """The ``INSERT`` the ORM would send for a new ``instance``, as SQL and parameters, for
    a caller that runs several in one statement; its automatic primary key is left to the
    database. Fields run their ``pre_save`` (``auto_now_add``) and ``get_db_prep_save`` as
    in ``Model.save`` (a value left to a ``db_default`` alone is not supported: psycopg
    refuses it). ``computed`` maps an attname to an SQL expression written in place of its
    value (another row's new id, from a CTE of the caller's statement).

    A value that is None is written as ``NULL`` in the statement, not sent as a parameter: a
    new run leaves a dozen columns empty, and psycopg parses a statement of more than 50
    parameters again at every execution instead of once (docs/performance.md#send). Each
    set of empty columns is its own statement text, prepared once like any other."""
    model = type(instance)
    expressions = dict(computed or {})
    values = {
        field.attname: field.get_db_prep_save(field.pre_save(instance, add=True), connection)
        for field in _inserted_fields(model, ())
        if field.attname not in expressions
    }
    expressions.update((name, "NULL") for name, value in values.items() if value is None)
    shape = tuple(sorted(expressions.items()))
    params = [values[field.attname] for field in _inserted_fields(model, shape)]
    return statements.row_insert(model, shape), params


@functools.cache
def _inserted_fields(model: type[Model], computed: tuple[tuple[str, str], ...]) -> list[Any]:
    """The fields whose values ``insert`` sends, in the statement's order: every local
    concrete field but the automatic key and those ``computed`` gives (as
    ``statements.row_insert`` lays out its columns)."""
    meta = model._meta
    expressions = dict(computed)
    return [
        field
        for field in meta.local_concrete_fields
        if field is not meta.auto_field and field.attname not in expressions
    ]


def mark_saved(instance: Model, pk: Any) -> None:
    """What ``Model.save`` leaves on a new instance once its row is written."""
    instance.pk = pk
    instance._state.adding = False
    instance._state.db = connection.alias
