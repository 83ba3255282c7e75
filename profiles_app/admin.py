from typing import Any

from django import forms
from django.contrib import admin

from profiles_app.models import AgentProfile


def _installed_skills() -> list[str]:
    from skills_app.store import get_store

    return list(get_store().scan().skills)


class AgentProfileForm(forms.ModelForm):
    class Meta:
        model = AgentProfile
        fields = "__all__"

    def clean_enabled_skills(self) -> Any:
        """A name that is no installed skill would never be listed: refuse it with the names there are.
        Names the profile already lists (a skill removed since) stay, so they never block another edit."""
        value = self.cleaned_data.get("enabled_skills")
        if not isinstance(value, list):
            return value  # the model's validator says what is wrong
        before = set(self.instance.enabled_skills or []) if self.instance.pk else set()
        installed = _installed_skills()
        unknown = [n for n in value if isinstance(n, str) and n != "*" and n not in installed and n not in before]
        if unknown:
            names = ", ".join(repr(n) for n in unknown)
            raise forms.ValidationError(
                f"There is no skill named {names}. Installed skills: {', '.join(installed) or 'none'} "
                f"(or \"*\" for all of them).")
        return value


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
    form = AgentProfileForm
    list_display = ("id", "name", "model", "llm_backend", "temperature", "max_iterations", "planning_enabled", "is_active")
    list_filter = ("llm_backend", "planning_enabled", "think_enabled", "is_active")
    search_fields = ("id", "name", "system_prompt")
    fieldsets = (
        (None, {"fields": ("id", "name", "is_active", "system_prompt")}),
        ("Model", {"fields": ("llm_backend", "model", "temperature", "max_iterations")}),
        ("Tools", {"fields": ("enabled_tools", "tool_calling", "prompt_budget_tokens", "allow_dangerous_tools_for_users",
                              "scratchpad_sections")}),
        ("Skills", {"fields": ("enabled_skills",)}),
        ("Planning", {"fields": ("planning_enabled", "planning_phase2_enabled")}),
        (
            "Thinking mechanics",
            {
                "fields": (
                    "think_enabled", "iteration_budget_enabled", "goal_anchoring_enabled",
                    "goal_anchoring_interval", "anti_stall_enabled", "anti_stall_threshold",
                    "step_validation_enabled", "adaptive_replan_enabled", "local_model_aids_enabled", "local_model_aids_off",
                )
            },
        ),
        (
            "Subagents",
            {"fields": ("subagent_system_prompt", "subagent_tools", "subagent_planning_enabled", "subagent_timeout_seconds")},
        ),
    )

    def get_form(self, request, obj=None, change=False, **kwargs):  # type: ignore[no-untyped-def]
        form = super().get_form(request, obj, change=change, **kwargs)
        field = form.base_fields.get("enabled_skills")
        if field is not None:
            field.help_text = f"{field.help_text} Installed skills: {', '.join(_installed_skills()) or 'none'}."
        return form

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return ("id",) if obj else ()
