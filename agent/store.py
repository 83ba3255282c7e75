"""How the agent reads and writes sessions, without importing the sessions app.

``SessionStore`` is implemented by ``sessions_app.store.DjangoSessionStore``; an ephemeral
subagent keeps its context in a plain list (``agent.turn.Turn.history``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from agent.llm.base import ChatMessage


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    seq: int
    message: ChatMessage


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionState:
    id: str
    owner_id: int | None
    owner_is_staff: bool
    owner_info: dict[str, Any]
    profile_id: str
    context: list[StoredMessage]
    context_token_count: int
    # The model chosen for this session (the chat's model picker) and its backend; "" = the profile's.
    model: str = ""
    model_backend: str = ""


class SessionNotFound(LookupError):
    pass


class SessionStore(Protocol):
    async def load(self, session_id: str) -> SessionState:
        """The session and its LLM context. Raises SessionNotFound."""
        ...

    async def append(self, session_id: str, message: ChatMessage, *, run_id: str, buffer: str = "both") -> int:
        """Persist one message now (the turn is saved as it happens); returns its seq."""
        ...

    async def set_profile(self, session_id: str, profile_id: str) -> None: ...

    async def set_token_count(self, session_id: str, count: int) -> None: ...

    async def compress(self, session_id: str, *, removed: list[int], summary: ChatMessage) -> None:
        """Replace the context rows ``removed`` by ``summary`` (display rows are kept)."""
        ...

    async def mark_interrupted(self, session_id: str, run_id: str) -> None: ...


def repair_context(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Make a history safe to send: every assistant tool call gets a result.

    A turn that died midway (crash, restart) can leave an assistant message whose
    tool calls have no results; models reject or misread that. Such calls get a
    synthetic result saying the turn was interrupted; stray tool results without
    a call are dropped.
    """
    out: list[ChatMessage] = []
    pending: dict[str, str] = {}
    for msg in messages:
        if msg.role == "tool":
            if msg.tool_call_id and msg.tool_call_id in pending:
                pending.pop(msg.tool_call_id)
                out.append(msg)
            continue
        if pending:
            out.extend(_interrupted_results(pending))
            pending = {}
        out.append(msg)
        if msg.role == "assistant":
            pending = {c.id: c.name for c in msg.tool_calls}
    if pending:
        out.extend(_interrupted_results(pending))
    return out


def _interrupted_results(pending: dict[str, str]) -> list[ChatMessage]:
    return [
        ChatMessage(role="tool", tool_call_id=cid, name=name,
                    content="(no result: the turn was interrupted before this tool finished)")
        for cid, name in pending.items()
    ]
