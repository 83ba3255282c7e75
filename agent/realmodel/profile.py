"""The ``local_small`` profile: a prompt and a tool set a 0.5B model can handle.

A small model does best with few tools, one short rule per tool naming the exact
arguments, and no planning or thinking calls (each extra call costs seconds on a
CPU and the model rarely uses them well).
"""
from __future__ import annotations

from typing import Any

PROFILE_ID = "local_small"

TOOLS = [
    "get_current_datetime", "filesystem", "user_notes", "memory_save", "memory_search",
    "schedule_recall", "todo", "spawn_agent",
]

# No example calls in the prompt: after a tool result, Qwen2.5-Coder 0.5B copied every example
# call of an earlier version (a memory_save "cat_name", a recall for /var/log/app.log) and the
# aids ran them. The tool schemas reach the model through the chat template anyway.
SYSTEM_PROMPT = """\
You are Navi, a helpful assistant. Answer briefly and directly.

For greetings and general knowledge questions, answer in words without tools.
Use a tool only when the user's request needs it, and call one tool at a time.
When a tool result arrives, do not call any tool again: answer the user's question in
words, copying numbers, names, dates and times exactly from the result."""


SUBAGENT_PROMPT = """\
You are a helper. Do the task you were given, then answer with the result only, in one or two sentences."""


def profile_defaults(*, alias: str, aids: bool = True) -> dict[str, Any]:
    """Field values of the ``local_small`` AgentProfile."""
    return {
        "name": "Local small model",
        "system_prompt": SYSTEM_PROMPT,
        "subagent_system_prompt": SUBAGENT_PROMPT,
        "enabled_tools": list(TOOLS),
        "subagent_tools": ["get_current_datetime", "filesystem", "user_notes", "memory_search"],
        "model": alias,
        "llm_backend": "openai",
        "temperature": 0.2,
        "max_iterations": 6,
        "planning_enabled": False,
        "planning_phase2_enabled": False,
        "think_enabled": False,
        "iteration_budget_enabled": False,
        "goal_anchoring_enabled": False,
        "anti_stall_enabled": True,
        "step_validation_enabled": False,
        "adaptive_replan_enabled": False,
        "subagent_planning_enabled": False,
        "subagent_timeout_seconds": 300,
        "scratchpad_sections": [],
        "local_model_aids_enabled": aids,
        "is_active": True,
    }


def profile_upsert(*, alias: str, aids: bool = True) -> tuple[Any, bool]:
    """Create or update ``local_small``; returns (profile, created). Invalidates cached contexts."""
    from agent.models import AgentProfile

    profile, created = AgentProfile.objects.update_or_create(id=PROFILE_ID, defaults=profile_defaults(alias=alias,
                                                                                                      aids=aids))
    try:
        from agent.loop import get_agent

        get_agent().builder.invalidate(PROFILE_ID)
    except Exception:  # noqa: BLE001 - only a cache in this process
        pass
    return profile, created
