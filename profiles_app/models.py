"""AgentProfile: tools, prompt, model and thinking mechanics per domain (spec 002 "Profiles", spec 001 flags)."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models


def _validate_name_list(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError("Must be a JSON list of non-empty names, e.g. [\"web_search\", \"todo\"].")


# The local-model aids one by one (agent/aids.py, docs/real-model.md); a profile switches single
# aids off with ``local_model_aids_off``.
LOCAL_MODEL_AIDS = ("text_calls", "repair", "repeat_guard", "nudges", "answer_after_success", "todo_progress",
                    "answer_retry", "named_files", "doubts")
# Aids that keyed on the wording of requests, removed in issue 24 (a data migration drops them from profiles).
REMOVED_AIDS = ("greeting", "shortlist", "template_args", "keep_request", "refusal_retry", "one_off_reminder")


def _validate_aid_names(value: object) -> None:
    _validate_name_list(value)
    unknown = [v for v in value if v not in LOCAL_MODEL_AIDS]  # type: ignore[attr-defined]
    if unknown:
        raise ValidationError(f"Unknown local-model aid(s) {', '.join(map(repr, unknown))}: "
                              f"use names from {', '.join(LOCAL_MODEL_AIDS)}.")


class AgentProfile(models.Model):
    class Backend(models.TextChoices):
        OLLAMA = "ollama", "Ollama"
        OPENAI = "openai", "OpenAI-compatible"

    id = models.SlugField(primary_key=True, max_length=64, help_text="Identifier used in the API and in sessions.")
    name = models.CharField(max_length=120)
    system_prompt = models.TextField(blank=True, help_text="Domain instructions, appended after the persona.")
    subagent_system_prompt = models.TextField(blank=True, help_text="Prompt for subagents spawned with this profile.")
    enabled_tools = models.JSONField(default=list, blank=True, validators=[_validate_name_list])
    subagent_tools = models.JSONField(
        default=list, blank=True, validators=[_validate_name_list],
        help_text="Tools of subagents with this profile; empty = enabled_tools.",
    )
    enabled_skills = models.JSONField(
        default=list, blank=True, validators=[_validate_name_list],
        help_text="Skills listed in this profile's prompt (names, or [\"*\"] for all); they need the skill_view "
                  "tool among enabled_tools. See the skills page (/skills/).",
    )
    model = models.CharField(max_length=200, blank=True, help_text="Model override; empty = OLLAMA_DEFAULT_MODEL.")
    llm_backend = models.CharField(max_length=32, choices=Backend.choices, default=Backend.OLLAMA)
    temperature = models.FloatField(default=0.7)
    max_iterations = models.PositiveIntegerField(default=50)
    planning_enabled = models.BooleanField(default=False)
    planning_phase2_enabled = models.BooleanField(default=False)
    # Thinking mechanics (spec 001 table; defaults as documented).
    think_enabled = models.BooleanField(default=True)
    iteration_budget_enabled = models.BooleanField(default=True)
    goal_anchoring_enabled = models.BooleanField(default=True)
    goal_anchoring_interval = models.PositiveIntegerField(default=5)
    anti_stall_enabled = models.BooleanField(default=True)
    anti_stall_threshold = models.PositiveIntegerField(default=8)
    step_validation_enabled = models.BooleanField(default=False)
    adaptive_replan_enabled = models.BooleanField(default=False)
    subagent_planning_enabled = models.BooleanField(default=False)
    subagent_timeout_seconds = models.PositiveIntegerField(default=300)
    scratchpad_sections = models.JSONField(default=list, blank=True, validators=[_validate_name_list])
    # Local-model aids (tool calls written as JSON text, one repair prompt, repeated-call guard).
    local_model_aids_enabled = models.BooleanField(default=True)
    local_model_aids_off = models.JSONField(
        default=list, blank=True, validators=[_validate_aid_names],
        help_text="Single local-model aids to switch off, e.g. [\"shortlist\"]. Names: " + ", ".join(LOCAL_MODEL_AIDS))
    class ToolCalling(models.TextChoices):
        AUTO = "auto", "Auto: native tool calls, or constrained decisions for a model without them"
        NATIVE = "native", "Native tool calls (the model fills tool_calls)"
        CONSTRAINED = "constrained", "Constrained decisions (the server's grammar engine)"

    tool_calling = models.CharField(
        max_length=16, choices=ToolCalling.choices, default=ToolCalling.AUTO,
        help_text="How the model calls tools. Constrained: each step's choice (answer, or one tool with valid "
                  "arguments) is generated under a JSON schema by the model server (Ollama format, OpenAI "
                  "response_format); for small local models. Auto picks it for a model without native tool calls.")
    prompt_budget_tokens = models.PositiveIntegerField(
        default=2000,
        help_text="Tokens the system prompt and tool definitions may take (0 = no bound). Beyond it tool "
                  "definitions are compacted, then tools past the budget are offered on demand (find_tools).")
    # DESIGN.md §6: terminal, ssh_exec, code_exec, write_tool and filesystem writes are
    # staff-only unless a profile explicitly opens them to every user.
    allow_dangerous_tools_for_users = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    def clean(self) -> None:
        if not 0.0 <= self.temperature <= 2.0:
            raise ValidationError({"temperature": "Temperature must be between 0 and 2."})
        if self.max_iterations < 1:
            raise ValidationError({"max_iterations": "At least one iteration is needed."})
