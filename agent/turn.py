"""State of one turn, shared by run_stream, run and run_ephemeral."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agent.gate import TurnGuard
from agent.llm.base import ChatMessage
from agent.profiles import ProfileSpec

Saver = Callable[[ChatMessage, str], Awaitable[None]]


@dataclass
class Turn:
    """Everything the tool-calling loop needs for one turn.

    ``save(message, buffer)`` persists a message (a Django row for a session, a list
    append for a subagent) and the loop also appends it to ``history`` — the context
    the model sees.
    """

    session_id: str
    profile: ProfileSpec
    history: list[ChatMessage]
    save: Saver
    stop_event: asyncio.Event
    goal: str
    memory: str | None
    emit: bool = True  # stream text/thinking to the user (False for subagents)
    subagent: bool = False
    persistent: bool = True
    final_text: str = ""
    outcome: str = "stop"  # stop | max_iterations | stopped | error
    context_tokens: int = 0
    profile_switched_to: str | None = None
    excluded_tools: frozenset[str] = field(default_factory=frozenset)
    named_files: tuple[str, ...] = ()  # files of the working directory the user's message names (``named_files``)
    guard: TurnGuard = field(default_factory=TurnGuard)  # taint and rules: the policy point's view (agent.gate)

    async def add(self, message: ChatMessage, buffer: str = "both") -> None:
        await self.save(message, buffer)
        if buffer in ("both", "context"):
            self.history.append(message)
