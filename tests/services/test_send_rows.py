"""A send's new rows: ``agents.db.rows.insert`` writes what the ORM writes, and on PostgreSQL the
message, its run and the run's ledger entry go in one statement
(``_queue_run_with_its_message``, agents/services/conversations.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.db import rows
from agents.models import AgentRun, Conversation, Message, RunEvent, UsageEntry
from agents.protocol import message_created_payload
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


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
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


def test_on_postgresql_a_sends_rows_and_its_event_are_one_statement(conversation, user):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's path; SQLite saves the rows one by one (the ORM)")
    last_seq = conversation.last_seq
    with CaptureQueriesContext(connection) as queries:
        result = message_send(conversation=conversation, user=user, content="hi", client_id="c")
    # The lock and the reads under it are the send's other statements (and the savepoint,
    # its transaction inside the test's).
    others = ("SELECT", "SAVEPOINT", "RELEASE SAVEPOINT")
    writes = [query["sql"] for query in queries if not query["sql"].lstrip().startswith(others)]
    tables = (Message, AgentRun, UsageEntry, RunEvent, Conversation)
    assert len(writes) == 1
    assert all(model._meta.db_table in writes[0] for model in tables)

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
    assert conversation.title == "hi"

    # message.created: the next seq, the message's id written into its payload, as stored
    # and as handed back.
    event = RunEvent.objects.get(conversation=conversation)
    assert (event.seq, event.type, event.run_id) == (last_seq + 1, "message.created", run.pk)
    assert conversation.last_seq == last_seq + 1
    assert event.payload == message_created_payload(message)
    assert event.payload["message"]["id"] == message.pk


def test_on_postgresql_a_sends_statement_binds_few_enough_values_to_be_parsed_once(
    conversation, user, monkeypatch
):
    """psycopg keeps its parse of a statement's text only up to a number of parameters; above
    it, the text is parsed again at every send. Empty columns are written as ``NULL``, so a
    send's one statement stays under the limit."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's path; SQLite saves the rows one by one (the ORM)")
    from django.db.backends.utils import CursorWrapper
    from psycopg import _queries

    bound: list[int] = []
    execute = CursorWrapper.execute

    def counting(self, sql, params=None):
        if "new_message" in str(sql):
            bound.append(len(params))
        return execute(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", counting)
    message_send(conversation=conversation, user=user, content="hi", client_id="c")

    [count] = bound
    assert count <= _queries.MAX_CACHED_STATEMENT_PARAMS
