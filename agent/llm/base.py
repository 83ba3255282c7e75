"""Backend-neutral LLM types: messages, tool calls, stream chunks, the protocol.

The agent loop only ever sees these; the Ollama and OpenAI-compatible adapters
translate to and from their wire formats.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRequest:
    """One call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any]
    # Set when the model's arguments were not valid JSON / not an object: the loop
    # tells the model instead of running the tool.
    arguments_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One message of a conversation, as stored and as sent to a model."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    images: tuple[str, ...] = ()  # base64, no data-URI prefix
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # tool name on tool results
    thinking: str | None = None
    is_plan: bool = False
    is_summary: bool = False
    is_recall: bool = False
    is_compression: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


ChunkKind = Literal["thinking", "text", "tool_calls", "done"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamChunk:
    """A normalised piece of a streamed answer.

    kind == "thinking": ``text`` is a reasoning delta.
    kind == "text": ``text`` is an answer delta.
    kind == "tool_calls": ``tool_calls`` holds complete calls.
    kind == "done": the last chunk; ``done_reason`` ("stop", "length", "tool_calls", ...)
    and the token counts of the request (``prompt_eval_count`` is the prompt size,
    ``eval_count`` the generated tokens), when the server reports them.
    """

    kind: ChunkKind
    text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """A whole (non-streamed) answer."""

    text: str
    thinking: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCapabilities:
    tools: bool = True
    thinking: bool = True
    vision: bool = False


class LLMError(Exception):
    """The model server could not answer; ``str(err)`` is a message a person can act on."""


class ModelNotFound(LLMError):
    pass


class BackendUnreachable(LLMError):
    pass


class StreamTimeout(LLMError):
    pass


class ConstraintsUnsupported(LLMError):
    """The server refused every form of schema-constrained output (``format`` / ``response_format``).

    The backend remembers this per server; the agent then falls back to tool calls written as text."""


@runtime_checkable
class LLMBackend(Protocol):
    """What the agent needs from a model server.

    ``stream_complete`` returns an async generator; calling ``aclose()`` on it
    closes the HTTP response (the connection to the model server really ends).
    """

    name: str

    def stream_complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool = False,
        temperature: float | None = None,
        num_ctx: int | None = None,
        format: dict[str, Any] | str | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamChunk]: ...

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool = False,
        temperature: float | None = None,
        num_ctx: int | None = None,
        format: dict[str, Any] | str | None = None,
    ) -> Completion: ...

    async def capabilities(self, model: str) -> ModelCapabilities: ...
