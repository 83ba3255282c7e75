import profiles_app.models
from django.db import migrations, models

SKILL_TOOLS = ("skill_view", "skill_write")


def enable_bundled_skills(apps, schema_editor):
    """The documented profiles get the skill tools and their bundled skills (an edited list is kept)."""
    from profiles_app.default_profiles import DEFAULT_SKILLS

    AgentProfile = apps.get_model("agent", "AgentProfile")
    for profile in AgentProfile.objects.filter(id__in=list(DEFAULT_SKILLS)):
        tools = list(profile.enabled_tools or [])
        profile.enabled_tools = tools + [t for t in SKILL_TOOLS if t not in tools]
        if not profile.enabled_skills:
            profile.enabled_skills = list(DEFAULT_SKILLS[profile.id])
        profile.save(update_fields=["enabled_tools", "enabled_skills"])


class Migration(migrations.Migration):

    dependencies = [
        ('agent', '0004_local_model_aids_more'),
    ]

    operations = [
        migrations.AddField(
            model_name='agentprofile',
            name='enabled_skills',
            field=models.JSONField(blank=True, default=list, help_text='Skills listed in this profile\'s prompt (names, or ["*"] for all); they need the skill_view tool among enabled_tools. See the skills page (/skills/).', validators=[profiles_app.models._validate_name_list]),
        ),
        migrations.RunPython(enable_bundled_skills, migrations.RunPython.noop),
    ]
