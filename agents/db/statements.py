"""Every raw SQL statement of the project, and the database capabilities that choose them.

Statements are composed with ``psycopg.sql`` from the models' own metadata (tables and
column lists from ``_meta``), never with string formatting; values are always parameters.
Each statement has a header: its parameters, the columns it returns, what it fences, and
what the caller publishes once it commits.

Nothing else in the project tests which database it runs on: callers ask the capabilities
below, as Django's own code asks ``connection.features``.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Model
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


# --------------------------------------------------------------------------------------
# A send and its reads (agents/services/conversations.py, agents/selectors.py)
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# Sockets' session checks (the socket session check)
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# The knowledge base's full-text index
# --------------------------------------------------------------------------------------
