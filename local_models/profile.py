"""The ``local_small`` profile: a prompt and a tool set a 0.5B–1.5B model can handle.

Few tools, constrained decisions (the model server's grammar engine makes every call name a
real tool with arguments that fit its schema), and no planning or thinking calls (each extra
call costs seconds on a CPU and the model rarely uses them well).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PROFILE_ID = "local_small"

# No memory_search: the memory summary already reaches every session, and with it offered the 0.5B
# model searched instead of saving ("remember that ...") and searched again after each result.
TOOLS = [
    "get_current_datetime", "filesystem", "user_notes", "memory_save",
    "schedule_recall", "todo", "spawn_agent",
]

# The prompt says what tools are for in general, never how a particular request is worded: the
# choice between answering and calling a tool is made under a schema (agent/decide.py), from the
# tool menu built out of the tools' own descriptions.
SYSTEM_PROMPT = """\
You are Navi, a helpful assistant. Answer briefly and directly, in plain words.
Use a tool only when the request needs one: to find out what you cannot know yourself (the time
or date, what a file says) or to do something for the user (write a file or a note, remember a
fact, schedule a reminder, keep a todo list, hand a task to a helper). Greetings, thanks and
questions of general knowledge need no tool. After a tool result, answer from it and copy
numbers, names, dates and times exactly."""


SUBAGENT_PROMPT = """\
You are a helper. Do the task you were given with your tools, then answer with the result only,
in one or two sentences, copying numbers, names and dates exactly."""


def profile_defaults(*, alias: str, aids: bool = True, constrained: bool = True,
                     aids_off: Sequence[str] = ()) -> dict[str, Any]:
    """Field values of the ``local_small`` AgentProfile (``aids_off``: single aids switched off)."""
    return {
        "name": "Local small model",
        "system_prompt": SYSTEM_PROMPT,
        "subagent_system_prompt": SUBAGENT_PROMPT,
        "enabled_tools": list(TOOLS),
        # No memory_search for the helper either (the memory block reaches it too): asked to "look up the
        # magic number in facts.txt", the 1.5B's helper searched the memory and never opened the file.
        "subagent_tools": ["get_current_datetime", "filesystem", "user_notes"],
        "model": alias,
        "llm_backend": "openai",
        "temperature": 0.0,
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
        "local_model_aids_off": list(aids_off),
        "tool_calling": "constrained" if constrained else "native",
        "prompt_budget_tokens": 2000,
        "is_active": True,
    }


def profile_upsert(*, alias: str, aids: bool = True, constrained: bool = True,
                   aids_off: Sequence[str] = ()) -> tuple[Any, bool]:
    """Create or update ``local_small``; returns (profile, created). Invalidates cached contexts. An
    unknown name in ``aids_off`` raises ValueError naming the valid ones, before anything is saved."""
    from profiles_app.models import LOCAL_MODEL_AIDS, AgentProfile

    unknown = [a for a in aids_off if a not in LOCAL_MODEL_AIDS]
    if unknown:
        raise ValueError(f"unknown local-model aid(s) {', '.join(map(repr, unknown))}: "
                         f"use names from {', '.join(LOCAL_MODEL_AIDS)}")
    profile, created = AgentProfile.objects.update_or_create(id=PROFILE_ID, defaults=profile_defaults(
        alias=alias, aids=aids, constrained=constrained, aids_off=aids_off))
    try:
        from agent.loop import get_agent

        get_agent().builder.invalidate(PROFILE_ID)
    except Exception:  # noqa: BLE001 - only a cache in this process
        pass
    return profile, created
