"""The log tables' rows carry one index entry less each: the index on ``ModelCall.run``
alone and the one on ``RunEvent.conversation`` alone are dropped, since the unique
constraints' indexes start with those columns and serve every lookup by them.

Only the indexes are dropped: Django's own way (``AlterField``) would also drop and re-add
the foreign keys, which checks every row of two of the largest tables again.
"""

import django.db.models.deletion
from django.db import migrations, models

# (model, column): a lone index on the column, other than the key's or a unique one.
REDUNDANT = [("ModelCall", "run_id"), ("RunEvent", "conversation_id")]


def _lone_indexes(schema_editor, table, column):
    with schema_editor.connection.cursor() as cursor:
        found = schema_editor.connection.introspection.get_constraints(cursor, table)
    return [
        name
        for name, info in found.items()
        if info["index"]
        and info["columns"] == [column]
        and not (info["unique"] or info["primary_key"] or info["foreign_key"])
    ]


def drop_lone_indexes(apps, schema_editor):
    for model_name, column in REDUNDANT:
        table = apps.get_model("agents", model_name)._meta.db_table
        for name in _lone_indexes(schema_editor, table, column):
            schema_editor.execute(
                schema_editor.sql_delete_index
                % {"name": schema_editor.quote_name(name), "table": schema_editor.quote_name(table)}
            )


def create_lone_indexes(apps, schema_editor):
    for model_name, column in REDUNDANT:
        table = apps.get_model("agents", model_name)._meta.db_table
        if not _lone_indexes(schema_editor, table, column):
            name = schema_editor.quote_name(f"{table}_{column}_lone")
            schema_editor.execute(
                f"CREATE INDEX {name} ON {schema_editor.quote_name(table)} "
                f"({schema_editor.quote_name(column)})"
            )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0013_run_updates_stay_on_their_page"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="modelcall",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="model_calls",
                        to="agents.agentrun",
                        verbose_name="run",
                    ),
                ),
                migrations.AlterField(
                    model_name="runevent",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="agents.conversation",
                        verbose_name="conversation",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_lone_indexes, create_lone_indexes)],
        ),
    ]
