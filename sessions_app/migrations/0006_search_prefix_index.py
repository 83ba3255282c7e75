"""SQLite: rebuild the search index with a prefix index (schema.py); nothing to do on PostgreSQL."""
from django.db import migrations


def forwards(apps, schema_editor):
    from sessions_app.search import schema

    schema.rebuild(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0005_session_model")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
