"""A run's row is updated at every stored reply (its tokens and heartbeat). Without an index
on those columns, and with room left on each page, the update stays on the row's page (a HOT
update) instead of writing a new entry into each of the table's nine indexes."""

from django.db import migrations

from agents.db.statements import storage_parameters_supported

# Room for a run's updates on its own page; the rest of each page is filled as before.
RUN_FILLFACTOR = 80


def _set_fillfactor(apps, schema_editor, value):
    if not storage_parameters_supported(schema_editor.connection):
        return
    table = schema_editor.quote_name(apps.get_model("agents", "AgentRun")._meta.db_table)
    schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {int(value)})")


def leave_room(apps, schema_editor):
    _set_fillfactor(apps, schema_editor, RUN_FILLFACTOR)


def fill_pages(apps, schema_editor):
    _set_fillfactor(apps, schema_editor, 100)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0012_approval_cancelled"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="agentrun",
            name="agents_agen_status_37e365_idx",
        ),
        migrations.RunPython(leave_room, fill_pages),
    ]
