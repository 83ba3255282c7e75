"""Context variables shared between the agent loop and tools.

Spec 002 "Context Vars" and spec 001 "ContextVar restoration". The loop sets
them before each run / tool task and restores them in ``finally``; tools read
them to find "their" session, user and event sink.
"""
from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any

# The persistent session the current run belongs to ("subagent_<uuid12>" for an
# ephemeral subagent without a parent session).
current_session_id: ContextVar[str | None] = ContextVar("current_session_id", default=None)
# Queue a running tool (spawn_agent) puts subagent events into; the parent drains it.
current_event_sink: ContextVar[asyncio.Queue[Any] | None] = ContextVar("current_event_sink", default=None)
# Cooperative stop: the loop checks it before each LLM call, while streaming and after tools.
current_stop_event: ContextVar[asyncio.Event | None] = ContextVar("current_stop_event", default=None)
current_model: ContextVar[str | None] = ContextVar("current_model", default=None)
current_user_id: ContextVar[int | None] = ContextVar("current_user_id", default=None)
# "staff" or "user": dangerous tools (terminal, ssh_exec, code_exec, write_tool,
# filesystem writes) check it.
current_user_role: ContextVar[str | None] = ContextVar("current_user_role", default=None)
current_user_info: ContextVar[dict[str, Any] | None] = ContextVar("current_user_info", default=None)
# The AgentProfile spec (agent.profiles.ProfileSpec) the current run uses.
current_profile: ContextVar[Any | None] = ContextVar("current_profile", default=None)

# The turn's agent.gate.TurnGuard (taint and rules); a subagent builds its own from it.
current_guard: ContextVar[Any | None] = ContextVar("current_guard", default=None)

ALL_VARS: tuple[ContextVar[Any], ...] = (
    current_session_id,
    current_event_sink,
    current_stop_event,
    current_model,
    current_user_id,
    current_user_role,
    current_user_info,
    current_profile,
    current_guard,
)


def snapshot() -> dict[ContextVar[Any], Any]:
    """The current value of every context var, for restore()."""
    return {var: var.get() for var in ALL_VARS}


def restore(saved: dict[ContextVar[Any], Any]) -> None:
    for var, value in saved.items():
        var.set(value)
