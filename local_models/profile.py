"""The ``local_small`` profile: a prompt and a tool set a 0.5B model can handle.

A small model does best with few tools, one short rule per tool naming the exact
arguments, and no planning or thinking calls (each extra call costs seconds on a
CPU and the model rarely uses them well).
"""
from __future__ import annotations

from typing import Any

PROFILE_ID = "local_small"

# No memory_search: the memory summary already reaches every session, and with it offered the 0.5B
# model searched instead of saving ("remember that ...") and searched again after each result.
TOOLS = [
    "get_current_datetime", "filesystem", "user_notes", "memory_save",
    "schedule_recall", "todo", "spawn_agent",
]

# Call templates with <placeholders>, no concrete example values: after a tool result,
# Qwen2.5-Coder 0.5B copied every example call of an earlier version (a memory_save "cat_name",
# a recall for /var/log/app.log) and the aids ran them. With tool names only (no templates) it
# left out required arguments (filesystem without "action"). The "only when the user asks" lines:
# todo was the tool it called most often unasked, after nearly every tool result.
SYSTEM_PROMPT = """\
You are Navi, a helpful assistant. Answer briefly and directly.

Greetings and general knowledge questions: answer in words, without any tool.
Otherwise write exactly ONE tool call for what the user asked, in this form (these are the
only tools; words of the user's message are never tool names):
- the current time or date: {"name": "get_current_datetime", "arguments": {}}
- read a file: {"name": "filesystem", "arguments": {"action": "read", "path": "<file name>"}}
- "note down ..." or "make a note": {"name": "user_notes", "arguments": {"action": "add", "text": "<the words to note>"}}
- "remember that ...": {"name": "memory_save", "arguments": {"category": "other", "key": "<short_key>", "value": "<what the user said to remember>"}}
- "remind me in N minutes to ...": {"name": "schedule_recall", "arguments": {"call_type": "once", "when": "<N>m", "additional_context_message": "<what to do, with the file names>"}}
- only when the user asks for a todo list: {"name": "todo", "arguments": {"action": "set", "steps": ["<step 1>", "<step 2>"]}}
- only when the user asks for a subagent: {"name": "spawn_agent", "arguments": {"task": "<the user's whole request>"}}
Never call a tool the user did not ask for. When a tool result arrives, the request is
usually done: do not call any tool again, answer the user in words, copying numbers,
names, dates and times exactly from the result."""


# The subagent reads its own prompt, not the one above: without templates the 0.5B model, as a
# subagent, answered from nothing ("the magic number is 42") instead of reading the file.
SUBAGENT_PROMPT = """\
You are a helper. Do the task you were given with ONE tool call in this form:
- read a file: {"name": "filesystem", "arguments": {"action": "read", "path": "<file name>"}}
- the current time or date: {"name": "get_current_datetime", "arguments": {}}
When the tool result arrives, answer with the result only, in one or two sentences, copying
numbers, names and dates exactly from the result."""


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
        "is_active": True,
    }


def profile_upsert(*, alias: str, aids: bool = True) -> tuple[Any, bool]:
    """Create or update ``local_small``; returns (profile, created). Invalidates cached contexts."""
    from profiles_app.models import AgentProfile

    profile, created = AgentProfile.objects.update_or_create(id=PROFILE_ID, defaults=profile_defaults(alias=alias,
                                                                                                      aids=aids))
    try:
        from agent.loop import get_agent

        get_agent().builder.invalidate(PROFILE_ID)
    except Exception:  # noqa: BLE001 - only a cache in this process
        pass
    return profile, created
