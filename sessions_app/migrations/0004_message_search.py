"""Full-text search over messages and session titles (issue 22): see sessions_app/search/schema.py."""
from django.db import migrations


def forwards(apps, schema_editor):
    from sessions_app.search import schema

    schema.install(schema_editor.connection)


def backwards(apps, schema_editor):
    from sessions_app.search import schema

    schema.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0003_running_turns")]
    operations = [migrations.RunPython(forwards, backwards)]
