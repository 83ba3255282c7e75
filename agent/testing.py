"""Scripted doubles of the agent's ports and of an LLM backend, for testing the core without the apps.

    from agent import testing
    backend = testing.ScriptedBackend([testing.reply(calls=[("echo", {"text": "hi"})]), testing.reply("done")])
    with testing.plugged(profiles=testing.Profiles(ProfileSpec(id="p", name="P", enabled_tools=("echo",))),
                         tools=testing.Tools({"echo": lambda args: args["text"]})) as store:
        sid = store.create(profile_id="p")
        events = [e async for e in Agent(store=store).run_stream(sid, "say hi")]

Nothing here touches a database or a Django app; the doubles keep everything in memory. The
apps' real implementations are tested against the same protocols in the Django test tiers.
"""
from __future__ import annotations

import contextlib
import inspect
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent import ports
from agent.llm.base import ChatMessage, Completion, ModelCapabilities, StreamChunk, ToolCallRequest
from agent.profiles import ProfileNotFound, ProfileSpec
from agent.store import SessionNotFound, SessionState, StoredMessage

# ---------------------------------------------------------------------------- session store


@dataclass
class _Session:
    profile_id: str
    owner_id: int | None
    owner_is_staff: bool
    rows: list[tuple[int, str, ChatMessage]] = field(default_factory=list)  # (seq, buffer, message)
    token_count: int = 0
    interrupted_runs: list[str] = field(default_factory=list)
    model: str = ""
    model_backend: str = ""


class MemorySessionStore:
    """``SessionStore`` over dicts; ``display``/``context`` read the two buffers back."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._seq = 0

    def create(self, *, profile_id: str, owner_id: int | None = 1, owner_is_staff: bool = True) -> str:
        session_id = uuid.uuid4().hex
        self._sessions[session_id] = _Session(profile_id, owner_id, owner_is_staff)
        return session_id

    def set_model(self, session_id: str, model: str, backend: str = "") -> None:
        """The session's own model (as the chat's model picker sets it)."""
        s = self._get(session_id)
        s.model, s.model_backend = model, backend

    def _get(self, session_id: str) -> _Session:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFound(f"Session {session_id} does not exist.") from None

    def display(self, session_id: str) -> list[ChatMessage]:
        return [m for _, buffer, m in self._get(session_id).rows if buffer in ("both", "display")]

    def context(self, session_id: str) -> list[ChatMessage]:
        return [m for _, buffer, m in self._get(session_id).rows if buffer in ("both", "context")]

    def interrupted_runs(self, session_id: str) -> list[str]:
        return list(self._get(session_id).interrupted_runs)

    async def load(self, session_id: str) -> SessionState:
        s = self._get(session_id)
        context = [StoredMessage(seq=seq, message=m) for seq, buffer, m in s.rows if buffer in ("both", "context")]
        return SessionState(id=session_id, owner_id=s.owner_id, owner_is_staff=s.owner_is_staff, owner_info={},
                            profile_id=s.profile_id, context=context, context_token_count=s.token_count,
                            model=s.model, model_backend=s.model_backend)

    async def append(self, session_id: str, message: ChatMessage, *, run_id: str, buffer: str = "both") -> int:
        self._seq += 1
        self._get(session_id).rows.append((self._seq, buffer, message))
        return self._seq

    async def set_profile(self, session_id: str, profile_id: str) -> None:
        self._get(session_id).profile_id = profile_id

    async def set_token_count(self, session_id: str, count: int) -> None:
        self._get(session_id).token_count = count

    async def compress(self, session_id: str, *, removed: list[int], summary: ChatMessage) -> None:
        s = self._get(session_id)
        gone = set(removed)
        # Display rows stay; the removed context rows leave the context buffer.
        kept = [(seq, "display" if seq in gone and buffer == "both" else buffer, m)
                for seq, buffer, m in s.rows if not (seq in gone and buffer == "context")]
        self._seq += 1
        s.rows = [(self._seq, "context", summary), *kept]

    async def mark_interrupted(self, session_id: str, run_id: str) -> None:
        self._get(session_id).interrupted_runs.append(run_id)


# ---------------------------------------------------------------------------- tools and todo


@dataclass(frozen=True, slots=True)
class Result:
    """What a scripted tool returns to the loop (the shape of ``tools_app.base.ToolResult``)."""

    success: bool
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def for_model(self) -> str:
        return self.text


ToolFn = Callable[[dict[str, Any]], Any]


class Tools:
    """A ``ToolProvider`` whose tools are plain functions of their arguments (sync or async).

    A function's return value is the result text; an exception is an unsuccessful result with its
    message, as the real registry reports a ``ToolError``. ``calls`` records (name, args) in order.
    """

    def __init__(self, tools: dict[str, ToolFn], *, usable: Iterable[str] | None = None) -> None:
        self.tools = dict(tools)
        self.usable = set(usable) if usable is not None else set(self.tools)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._callbacks: list[Callable[[], None]] = []

    async def for_turn(self) -> Tools:
        return self

    def on_reload(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def names(self) -> list[str]:
        return list(self.tools)

    def tools_for_profile(self, enabled_tools: Iterable[str]) -> list[str]:
        wanted = set(enabled_tools)
        return [n for n in self.tools if n in wanted]

    def can_use(self, name: str) -> bool:
        return name in self.usable

    def schemas(self, names: Iterable[str]) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": n, "description": f"The {n} tool.",
                                                  "parameters": {"type": "object", "properties": {}}}}
                for n in names if n in self.tools]

    def doubt(self, name: str, args: dict[str, Any], request: str) -> ports.Doubt | None:
        return None  # the scripted tools know nothing of the user's words

    def named(self, request: str, among: Iterable[str]) -> list[tuple[str, str]]:
        return []  # nor what people call them

    def framing(self) -> tuple[str, ...]:
        return ()  # nor put words of their own around the user's

    async def execute(self, name: str, args: Any, *, allowed: set[str] | None = None) -> Result:
        self.calls.append((name, dict(args or {})))
        if name not in self.tools or (allowed is not None and name not in allowed):
            return Result(False, f"Error: unknown tool '{name}'.")
        try:
            value = self.tools[name](dict(args or {}))
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:  # noqa: BLE001 - a tool error goes back to the model
            return Result(False, f"Error: {exc}")
        return Result(True, str(value))


class TodoList:
    """A ``TodoBoard`` in a dict: session id -> steps with their status."""

    def __init__(self) -> None:
        self.boards: dict[str, list[dict[str, Any]]] = {}

    def read(self, session_id: str) -> list[dict[str, Any]]:
        return [dict(item) for item in self.boards.get(session_id, [])]

    def replace(self, session_id: str, steps: list[str]) -> None:
        self.boards[session_id] = [{"id": i + 1, "task": s, "status": "pending"} for i, s in enumerate(steps)]

    def restore(self, session_id: str, steps: list[dict[str, Any]]) -> None:
        self.boards[session_id] = [{"id": i + 1, "task": s["title"], "status": s.get("status", "pending")}
                                   for i, s in enumerate(steps)]

    def complete_next(self, session_id: str, note: str) -> None:
        for item in self.boards.get(session_id, []):
            if item["status"] != "done":
                item.update(status="done", note=note)
                return


class Profiles:
    """A ``ProfileSource`` holding the given profiles."""

    def __init__(self, *profiles: ProfileSpec) -> None:
        self.profiles = {p.id: p for p in profiles}

    def load(self, profile_id: str) -> ProfileSpec:
        try:
            return self.profiles[profile_id]
        except KeyError:
            raise ProfileNotFound(f"Profile {profile_id!r} does not exist.") from None

    def active_ids(self) -> list[str]:
        return list(self.profiles)


@dataclass
class Memory:
    """A ``MemoryProvider`` that knows one summary per user."""

    summaries: dict[int, str] = field(default_factory=dict)

    async def summary_for(self, user_id: int) -> str | None:
        return self.summaries.get(user_id)


def quiet_profile(**fields: Any) -> ProfileSpec:
    """A profile with the loop's mechanics off (no planning, budget, anchoring, stall warnings)."""
    base = ProfileSpec(id="test", name="Test", think_enabled=False, iteration_budget_enabled=False,
                       goal_anchoring_enabled=False, anti_stall_enabled=False, local_model_aids_enabled=False,
                       max_iterations=6)
    return replace(base, **fields)


@contextlib.contextmanager
def plugged(**implementations: Any) -> Iterator[MemorySessionStore]:
    """Plug doubles into ``agent.ports`` (a MemorySessionStore and empty todo/tools unless given) and
    put back what was there afterwards. Yields the session store."""
    before = ports.snapshot()
    store = implementations.setdefault("session_store", MemorySessionStore())
    implementations.setdefault("todo", TodoList())
    implementations.setdefault("tools", Tools({}))
    ports.provide(**implementations)
    try:
        yield store
    finally:
        ports.provide(**before)


# ---------------------------------------------------------------------------- model


@dataclass(frozen=True, slots=True)
class Reply:
    text: str = ""
    calls: tuple[ToolCallRequest, ...] = ()
    thinking: str = ""


def reply(text: str = "", *, calls: Sequence[tuple[str, dict[str, Any]]] = (), thinking: str = "") -> Reply:
    """One scripted model answer: text, tool calls as (name, arguments), optional reasoning."""
    return Reply(text, tuple(ToolCallRequest(id=f"call_{uuid.uuid4().hex[:8]}", name=n, arguments=a)
                             for n, a in calls), thinking)


class ScriptedBackend:
    """An ``LLMBackend`` that plays scripted replies in order (the last one again when they run out)
    and records every request's messages and tool names in ``requests``."""

    name = "scripted"

    def __init__(self, replies: Sequence[Reply | str], *, capabilities: ModelCapabilities | None = None) -> None:
        self.replies = [r if isinstance(r, Reply) else Reply(r) for r in replies] or [Reply("")]
        self.requests: list[dict[str, Any]] = []
        self._caps = capabilities or ModelCapabilities()

    def _next(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None) -> Reply:
        self.requests.append({"messages": list(messages),
                              "tools": [t["function"]["name"] for t in tools or ()]})
        return self.replies[min(len(self.requests), len(self.replies)) - 1]

    async def stream_complete(self, messages: Sequence[ChatMessage], *, model: str,
                              tools: Sequence[dict[str, Any]] | None = None, **_: Any) -> Any:
        r = self._next(messages, tools)
        if r.thinking:
            yield StreamChunk(kind="thinking", text=r.thinking)
        for piece in re.findall(r"\s*\S+", r.text):  # word by word, as a model streams
            yield StreamChunk(kind="text", text=piece)
        if r.calls:
            yield StreamChunk(kind="tool_calls", tool_calls=r.calls)
        yield StreamChunk(kind="done", done_reason="tool_calls" if r.calls else "stop",
                          prompt_eval_count=100, eval_count=10)

    async def complete(self, messages: Sequence[ChatMessage], *, model: str,
                       tools: Sequence[dict[str, Any]] | None = None, **_: Any) -> Completion:
        r = self._next(messages, tools)
        return Completion(text=r.text, thinking=r.thinking, tool_calls=r.calls, done_reason="stop",
                          prompt_eval_count=100, eval_count=10)

    async def capabilities(self, model: str) -> ModelCapabilities:
        return self._caps

