from django.contrib import admin

from profiles_app.models import AgentProfile


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
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

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return ("id",) if obj else ()
