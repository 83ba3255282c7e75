"""Issue 22: the documented profiles get session_search (look up past conversations)."""
from django.db import migrations

DOCUMENTED = ("secretary", "server_admin", "smart_home")


def forwards(apps, schema_editor):
    from profiles_app.default_profiles import reorder_tools

    AgentProfile = apps.get_model("agent", "AgentProfile")
    for profile in AgentProfile.objects.filter(id__in=DOCUMENTED):
        tools = list(profile.enabled_tools or [])
        if "session_search" not in tools:
            profile.enabled_tools = tools + ["session_search"]
            profile.save(update_fields=["enabled_tools"])
    reorder_tools(AgentProfile)


class Migration(migrations.Migration):
    dependencies = [("agent", "0007_budgets_and_removed_aids")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
