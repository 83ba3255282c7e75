"""The tools that need the agent itself: spawn_agent and switch_profile."""
from __future__ import annotations

import re
from typing import Any

from asgiref.sync import sync_to_async

from agent import ctx, ports
from agent.domains import DOMAIN_KEY, PROFILES
from agent.events import ProfileSwitched
from agent.profiles import ProfileNotFound, aload_profile
from tools_app.base import Tool, ToolError, ToolResult

# A task that is one name and no sentence: a file or function name, a path, a URL.
_A_NAME = re.compile(r"[\w.\-/:]+", re.ASCII)


class SpawnAgentTool(Tool):
    name = "spawn_agent"
    description = (
        "Hand a task to a helper agent (a subagent with a fresh context), which does it with its own tools and "
        "reports back: when the user asks for a helper, or for a self-contained job of several steps. Good "
        "subtasks take about 3 or more tool calls (research a topic, inspect a server, read several files). "
        "It runs to completion and returns its final answer; you see its tool calls live. Write `task` as a "
        "complete, self-contained instruction: the "
        "subagent does not see this conversation, so include every name, path, URL and requirement it needs, "
        "and say what to return. Optional `profile_id` picks the subagent's profile (its tools and prompt); "
        "default: the current profile. Unless the user asked for a helper, do not use it for a single tool "
        "call — call that tool yourself."
    )
    parameters = {
        "type": "object",
        "properties": {
            "task": {"type": "string", "minLength": 1, "description": "Complete instruction for the subagent."},
            "profile_id": {"type": "string", "description": "Profile for the subagent (optional).",
                           DOMAIN_KEY: PROFILES},
        },
        "required": ["task"],
        "additionalProperties": False,
    }
    # The subagent keeps its own time limit (the profile's subagent_timeout_seconds), which does not
    # run while one of its calls waits for the user's approval; this is only the registry's backstop.
    timeout = 24 * 3600.0
    max_output_chars = 20_000
    # The names this tool's description gives it, which a user says to ask for one (tests check they are its own).
    named_as = ("sub agent", "helper agent")

    def doubt(self, params: dict[str, Any], request: str) -> ports.Doubt | None:
        """A task that is one word or name and no instruction ("get_magic_number_from_facts.txt", the 1.5B, round
        21): the helper reads nothing but its task, so it is written again in words (the helper had read a file of
        that name, found none and said so)."""
        task = str(params.get("task") or "").strip()
        if not _A_NAME.fullmatch(task):
            return None  # words, or a sentence in a script written without spaces
        return ports.Doubt(reason=f"the task {task[:120]!r} is a single word, not an instruction; the helper sees "
                                  "nothing but its task. Write in words what it should do, with the names, files and "
                                  "numbers the user gave.")

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        from agent.loop import get_agent

        parent = ctx.current_session_id.get()
        profile_id = params.get("profile_id") or None
        if profile_id:
            try:
                await aload_profile(profile_id)
            except ProfileNotFound:
                raise ToolError(f"unknown profile {profile_id!r}; omit profile_id to use the current one") from None
        text, ok = await get_agent().run_ephemeral(params["task"], profile_id, parent_session_id=parent)
        if ctx.current_stop_event.get() is not None and ctx.current_stop_event.get().is_set():  # type: ignore[union-attr]
            return ToolResult(success=False, error="stopped by the user", output=text)
        if not ok:
            return ToolResult(success=False, error="the subagent did not finish (step limit or timeout)", output=text)
        return ToolResult(success=True, output=text or "(the subagent returned no text)",
                          metadata={ports.WORDS: bool(text)})


class SwitchProfileTool(Tool):
    name = "switch_profile"
    description = (
        "Switch this session to another profile when the user's request clearly belongs to its domain "
        "(e.g. server_admin for server work, smart_home for devices, secretary for research and writing). "
        "The new profile's prompt and tools apply from your next step on. Do not switch without a reason."
    )
    parameters = {
        "type": "object",
        "properties": {"profile_id": {"type": "string", "minLength": 1, "description": "Target profile id.",
                                      DOMAIN_KEY: PROFILES}},
        "required": ["profile_id"],
        "additionalProperties": False,
    }
    timeout = 30.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        from agent.loop import get_agent

        session_id = ctx.current_session_id.get()
        if not session_id or session_id.startswith("subagent_"):
            raise ToolError("switch_profile works only in a conversation session, not in a subagent")
        target = params["profile_id"].strip()
        try:
            profile = await aload_profile(target)
        except ProfileNotFound:
            available = await sync_to_async(_active_ids, thread_sensitive=False)()
            raise ToolError(f"unknown profile {target!r}; available: {', '.join(available)}") from None
        await get_agent().store.set_profile(session_id, profile.id)
        sink = ctx.current_event_sink.get()
        if sink is not None:
            sink.put_nowait(ProfileSwitched(profile_id=profile.id, profile_name=profile.name))
        return ToolResult(success=True, output=f"Switched to profile {profile.name} ({profile.id}).",
                          metadata={"switched_profile": profile.id})


def _active_ids() -> list[str]:
    return ports.profiles().active_ids()
