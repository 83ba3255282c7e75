"""Full-text search over memory_facts: FTS5 + triggers on SQLite, a GIN expression index on PostgreSQL."""
from django.db import migrations


def forwards(apps, schema_editor):
    from memory_app.search import install_search

    install_search(schema_editor)


def backwards(apps, schema_editor):
    from memory_app.search import uninstall_search

    uninstall_search(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("memory_app", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
