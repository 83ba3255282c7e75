from django.db import migrations


def create_profiles(apps, schema_editor):
    from profiles_app.default_profiles import install

    install(apps.get_model("agent", "AgentProfile"))


def remove_profiles(apps, schema_editor):
    from profiles_app.default_profiles import PROFILES

    apps.get_model("agent", "AgentProfile").objects.filter(id__in=[p["id"] for p in PROFILES]).delete()


class Migration(migrations.Migration):
    dependencies = [("agent", "0001_initial")]
    operations = [migrations.RunPython(create_profiles, remove_profiles)]
