"""A send's new rows: ``agents.rows.insert`` writes what the ORM writes, and on PostgreSQL the
message, its run and the run's ledger entry go in one statement
(``_queue_run_with_its_message``, agents/services/conversations.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents import rows
from agents.models import AgentRun, Message, UsageEntry
from agents.services.conversations import message_send
from agents.services.prompt_versions import prompt_version_current

pytestmark = pytest.mark.django_db

WRITTEN_AT_SAVE = {"id", "created_at"}  # differ between any two saves


def _row(model, pk) -> dict:
    row = model.objects.filter(pk=pk).values().get()
    return {name: value for name, value in row.items() if name not in WRITTEN_AT_SAVE}


def _inserted(instance, **computed: str):
    sql, params = rows.insert(instance, computed=computed)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    return type(instance).objects.latest("id").pk


def test_insert_writes_every_column_as_the_orm_does(conversation, user, default_profile):
    version = prompt_version_current(profile=default_profile)

    def message(client_id: str) -> Message:
        return Message(
            conversation=conversation,
            role=Message.Role.USER,
            content="Is 🙂 two code units? ' \" \\ %s",
            client_id=client_id,
            on_active_branch=False,
        )

    saved = message("c-1")
    saved.save(force_insert=True)
    inserted = _row(Message, _inserted(message("c-2")))  # a client id is unique per conversation
    assert inserted == {**_row(Message, saved.pk), "client_id": "c-2"}

    def run(trigger: Message) -> AgentRun:
        return AgentRun(
            conversation=conversation,
            trigger_message=trigger,
            profile_version=version,
            model_config=default_profile.model_config,
            model_name="scripted",
            mode="native",
        )

    saved_run = run(saved)
    saved_run.save(force_insert=True)
    # A computed column is any SQL expression: here the saved message's id, as a literal.
    inserted_run = _inserted(run(Message()), trigger_message_id=str(saved.pk))
    assert _row(AgentRun, inserted_run) == _row(AgentRun, saved_run.pk)
    assert AgentRun.objects.get(pk=inserted_run).created_at is not None

    # One ledger entry per run: each goes with its own run.
    entry = UsageEntry(user=user, kind=UsageEntry.Kind.RUN, run_id=saved_run.pk, reserved_tokens=7)
    entry.save(force_insert=True)
    inserted_entry = _inserted(
        UsageEntry(user=user, kind=UsageEntry.Kind.RUN, reserved_tokens=7),
        run_id=f"(SELECT id FROM {AgentRun._meta.db_table} WHERE id = {inserted_run})",
    )
    assert _row(UsageEntry, inserted_entry) == {
        **_row(UsageEntry, entry.pk),
        "run_id": inserted_run,
    }


def test_on_postgresql_a_sends_three_rows_are_one_statement(conversation, user):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's path; SQLite saves the three rows one by one (the ORM)")
    with CaptureQueriesContext(connection) as queries:
        result = message_send(conversation=conversation, user=user, content="hi", client_id="c")
    inserts = [query["sql"] for query in queries if "INSERT INTO" in query["sql"]]
    tables = (Message, AgentRun, UsageEntry)
    [together] = [sql for sql in inserts if all(m._meta.db_table in sql for m in tables)]
    assert len(inserts) == 2  # these three, and the message.created event
    assert "agents_runevent" in next(sql for sql in inserts if sql != together)

    # What the send hands back is what it wrote, and looks saved to the ORM.
    message, run = result.message, result.run
    assert Message.objects.get(conversation=conversation).pk == message.pk
    assert not message._state.adding
    assert not run._state.adding
    stored = AgentRun.objects.get(pk=run.pk)
    assert (stored.trigger_message_id, stored.status) == (message.pk, AgentRun.Status.QUEUED)
    assert run.trigger_message_id == message.pk
    entry = UsageEntry.objects.get(run_id=stored.pk)
    assert (entry.user_id, entry.conversation_id, entry.model_config_id) == (
        user.pk,
        conversation.pk,
        stored.model_config_id,
    )
    conversation.refresh_from_db()
    assert conversation.active_leaf_id == message.pk
