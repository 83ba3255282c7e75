"""Issue 24: aids keyed on wordings are gone; the documented profiles list their most used tools first;
local_small decides under a schema with a prompt that describes tools instead of example phrasings."""
from django.db import migrations

REMOVED_AIDS = {"greeting", "shortlist", "template_args", "keep_request", "refusal_retry", "one_off_reminder"}


def forwards(apps, schema_editor):
    from local_models.profile import SUBAGENT_PROMPT, SYSTEM_PROMPT, TOOLS
    from profiles_app.default_profiles import reorder_tools

    AgentProfile = apps.get_model("agent", "AgentProfile")
    for profile in AgentProfile.objects.all():
        kept = [a for a in profile.local_model_aids_off or [] if a not in REMOVED_AIDS]
        if kept != (profile.local_model_aids_off or []):
            profile.local_model_aids_off = kept
            profile.save(update_fields=["local_model_aids_off"])
    reorder_tools(AgentProfile)
    AgentProfile.objects.filter(id="local_small").update(
        tool_calling="constrained", system_prompt=SYSTEM_PROMPT, subagent_system_prompt=SUBAGENT_PROMPT,
        enabled_tools=TOOLS)


class Migration(migrations.Migration):
    dependencies = [("agent", "0006_tool_calling_prompt_budget")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
