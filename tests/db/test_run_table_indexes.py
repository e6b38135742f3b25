"""The run table's indexes, as a run's writes meet them (docs/performance.md#hot-updates).

Each insert of a run, and each change of its status, adds an entry to every index of the
table that covers the row. These tests hold the rules that keep that to what queries use:
no index on what every stored reply updates (the update stays on its page), the links a
plain run leaves empty indexed only where set, no PostgreSQL ``LIKE`` index on the status.
A new link to the run table (a foreign key is indexed whole by default) fails the second.
"""

from __future__ import annotations

import pytest
from django.db import connection

from agents.models import AgentRun, Notification
from agents.services.conversations import conversation_create, message_send

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's catalog (pg_index); SQLite's indexes are its own")


def _indexes(model) -> list[tuple[str, list[str], bool, list[str]]]:
    """Each index of the model's table: its name, columns, whether it is partial, and the
    operator classes of its columns."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT index.relname, array_agg(attribute.attname ORDER BY key.position), "
            "pg_index.indpred IS NOT NULL, array_agg(opclass.opcname ORDER BY key.position) "
            "FROM pg_index JOIN pg_class AS index ON index.oid = pg_index.indexrelid "
            "CROSS JOIN LATERAL unnest(pg_index.indkey, pg_index.indclass) "
            "WITH ORDINALITY AS key(column_number, opclass_oid, position) "
            "JOIN pg_attribute AS attribute ON attribute.attrelid = pg_index.indrelid "
            "AND attribute.attnum = key.column_number "
            "JOIN pg_opclass AS opclass ON opclass.oid = key.opclass_oid "
            "WHERE pg_index.indrelid = %s::regclass GROUP BY index.relname, pg_index.indpred",
            [model._meta.db_table],
        )
        return [(name, columns, partial, classes) for name, columns, partial, classes in cursor]


def test_no_index_holds_what_every_stored_reply_updates():
    every_reply = {"heartbeat_at", "prompt_tokens", "completion_tokens"}
    assert [name for name, columns, _, _ in _indexes(AgentRun) if every_reply & set(columns)] == []


def test_the_links_a_plain_run_leaves_empty_are_indexed_only_where_set(user):
    run = message_send(conversation=conversation_create(owner=user), user=user, content="q").run
    empty_links = {
        field.column
        for field in AgentRun._meta.concrete_fields
        if field.is_relation and getattr(run, field.attname) is None
    }
    assert {"replay_of_id", "parent_run_id", "forked_from_id", "continues_answer_id"} <= (
        empty_links
    )
    on_links = [
        (name, partial)
        for name, columns, partial, _ in _indexes(AgentRun)
        if empty_links & set(columns)
    ]
    # Each link stays indexed (its deletes and reverse lookups use it), where set only.
    assert len(on_links) == 4
    assert [name for name, partial in on_links if not partial] == []


def test_no_like_index_on_the_status_or_a_notifications_key():
    for model in (AgentRun, Notification):
        assert [
            name
            for name, _, _, classes in _indexes(model)
            if any(opclass.endswith("_pattern_ops") for opclass in classes)
        ] == []
