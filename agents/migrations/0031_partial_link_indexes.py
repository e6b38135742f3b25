"""Indexes a run's writes no longer pay for.

A run's insert and each change of its status (the claim, the end: not HOT updates, as the
status is indexed) add an entry to every index of the run table. Four of them index links
only some runs have (a replay, a fork, a continuation, a sub-agent's parent) and were full
indexes of mostly NULL values; the status also had PostgreSQL's ``LIKE`` index, which no
query uses. The links are now indexed where set, the parent by ``one_child_run_per_call``
(which starts with it); the ``LIKE`` index is gone. The same for a notification's schedule
and the ``LIKE`` index of its key (its unique index stays).

Django's ``AlterField`` would drop each foreign key with its index and add it again, which
re-checks every row of the table; here the state changes alone, and the old indexes are
dropped by name where they exist (their names are Django's, derived from the table and
column, so the same on every database this project made).
"""

from django.db import migrations, models
from django.db.models import Q

# The indexes that go, by model: the links' (made again below as partial ones), then
# PostgreSQL's LIKE indexes (absent elsewhere), each with its field.
LINK_INDEXES = {
    "agentrun": (
        ("replay_of", "agents_agentrun_replay_of_id_17af5116"),
        ("parent_run", "agents_agentrun_parent_run_id_07549e68"),
        ("forked_from", "agents_agentrun_forked_from_id_223ad0ae"),
        ("continues_answer", "agents_agentrun_continues_answer_id_1e26c6cb"),
    ),
    "notification": (("schedule", "agents_notification_schedule_id_2eeac192"),),
}
LIKE_INDEXES = {
    "agentrun": (("status", "agents_agentrun_status_fdbd2cf1_like"),),
    "notification": (("key", "agents_notification_key_8dfbecfb_like"),),
}


def _existing(schema_editor, model) -> set[str]:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        return set(connection.introspection.get_constraints(cursor, model._meta.db_table))


def drop_full_indexes(apps, schema_editor):
    for model_name, links in LINK_INDEXES.items():
        model = apps.get_model("agents", model_name)
        existing = _existing(schema_editor, model)
        for field, name in (*links, *LIKE_INDEXES[model_name]):
            if name in existing:
                schema_editor.remove_index(model, models.Index(fields=[field], name=name))


def add_full_indexes(apps, schema_editor):
    # The LIKE indexes are not made again: nothing needs them.
    for model_name, links in LINK_INDEXES.items():
        model = apps.get_model("agents", model_name)
        existing = _existing(schema_editor, model)
        for field, name in links:
            if name not in existing:
                schema_editor.add_index(model, models.Index(fields=[field], name=name))


def _link(model_name, name, to, on_delete, related_name, verbose_name):
    return migrations.AlterField(
        model_name=model_name,
        name=name,
        field=models.ForeignKey(
            blank=True,
            db_index=False,
            null=True,
            on_delete=on_delete,
            related_name=related_name,
            to=to,
            verbose_name=verbose_name,
        ),
    )


def _partial(model_name, field, name):
    return migrations.AddIndex(
        model_name=model_name,
        index=models.Index(condition=Q((f"{field}__isnull", False)), fields=[field], name=name),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0030_schedule_created_by"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                _link(
                    "agentrun",
                    "continues_answer",
                    "agents.message",
                    models.SET_NULL,
                    "continuations",
                    "continues answer",
                ),
                _link(
                    "agentrun",
                    "forked_from",
                    "agents.agentrun",
                    models.SET_NULL,
                    "forks",
                    "forked from",
                ),
                _link(
                    "agentrun",
                    "parent_run",
                    "agents.agentrun",
                    models.CASCADE,
                    "child_runs",
                    "parent run",
                ),
                _link(
                    "agentrun",
                    "replay_of",
                    "agents.agentrun",
                    models.SET_NULL,
                    "replays",
                    "replay of",
                ),
                _link(
                    "notification",
                    "schedule",
                    "agents.schedule",
                    models.SET_NULL,
                    "notifications",
                    "schedule",
                ),
            ],
            database_operations=[migrations.RunPython(drop_full_indexes, add_full_indexes)],
        ),
        _partial("agentrun", "replay_of", "agentrun_replay_of"),
        _partial("agentrun", "forked_from", "agentrun_forked_from"),
        _partial("agentrun", "continues_answer", "agentrun_continues_answer"),
        _partial("notification", "schedule", "notification_schedule"),
    ]
