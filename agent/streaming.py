"""One streamed LLM call turned into agent events.

Thinking is buffered until the call shows what kind of iteration it is: when the
answer text starts, the buffered thinking is emitted as ``thinking_delta`` events
and ``thinking_end``, then the text streams live as ``stream_delta``; when the
model calls tools, the loop emits the whole reasoning as one ``turn_thinking``
(spec 002 "Typical Event Sequences").

With the local-model aids on, text that looks like the start of a tool call
written as JSON (``{"name": …``, a ```json fence, ``<tool_call>``) or as markup (``<tools>``,
``<function name=…>``) is held back
until the end of the stream, so the user never sees raw call JSON when it turns
out to be a call.
"""
from __future__ import annotations

import re
from collections.abc import AsyncIterator

from agent.events import AgentEvent, StreamDelta, ThinkingDelta, ThinkingEnd
from agent.llm.base import StreamChunk, ToolCallRequest

# Where a call written as text may begin.
_CALL_START = re.compile(
    r'\{\s*"(?:name|tool|tool_name|function|type)"\s*:|<tool_call>|```[ \t]*(?:json|tool_call|tool|tool_code)?[ \t]*\n\s*[\[{]'
    r"|<(?:tools?|tool_calls?|functions?|function_call|invoke)(?=[\s>=])"
)
# The tags models wrap a call in when they write it as markup (Qwen writes "<tools>\n<function name=…>").
_CALL_TAGS = ("<tool_call>", "<tool_calls>", "<tools>", "<tool ", "<function", "<functions>", "<invoke")
# Text kept back at the end while streaming, in case a call opener straddles two deltas.
_TAIL = 24
_OPENER_CHARS = ("{", "[", "<", "`")


class StreamedCall:
    def __init__(self, chunks: AsyncIterator[StreamChunk], *, emit: bool, holdback: bool,
                 hold_refusal: bool = False, hold_openers: tuple[str, ...] = (), hold_all: bool = False,
                 hold_words: int = 0) -> None:
        self._chunks = chunks
        self._emit = emit
        self._holdback = holdback
        # A small model's "I'm sorry, I can't …" is held to the end: the aids may ask again instead.
        self._hold_refusal = hold_refusal
        # Other openings held like a refusal (lower case): the start of Navi's own steering sentences,
        # which a small model repeats as its answer.
        self._openers = REFUSAL_OPENERS + tuple(hold_openers)
        self._hold_all = hold_all  # a last attempt: shown only once it is known to be an answer
        # An answer of up to this many words is held to the end (the aids judge a short answer whole).
        self._hold_words = hold_words
        self.text = ""
        self.thinking = ""
        self.tool_calls: list[ToolCallRequest] = []
        self.done_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.eval_tokens: int | None = None
        self._pending_thinking: list[str] = []
        self._thinking_closed = False
        self._emitted = 0
        self._locked = False
        self.streamed_text = ""

    async def events(self) -> AsyncIterator[AgentEvent]:
        async for chunk in self._chunks:
            if chunk.kind == "thinking" and chunk.text:
                self.thinking += chunk.text
                if not self._thinking_closed:
                    self._pending_thinking.append(chunk.text)
            elif chunk.kind == "text" and chunk.text:
                for ev in self._close_thinking():
                    yield ev
                self.text += chunk.text
                for ev in self._text_events(final=False):
                    yield ev
            elif chunk.kind == "tool_calls":
                self.tool_calls.extend(chunk.tool_calls)
            elif chunk.kind == "done":
                self.done_reason = chunk.done_reason
                self.prompt_tokens = chunk.prompt_eval_count
                self.eval_tokens = chunk.eval_count

    def finish_events(self, *, is_tool_turn: bool, drop_held: bool = False) -> list[AgentEvent]:
        """Events owed at the end of the stream: unflushed thinking and, unless dropped, held text."""
        if is_tool_turn:
            return []
        out = self._close_thinking()
        if not drop_held:
            out.extend(self._text_events(final=True))
        return out

    def held_text(self) -> str:
        return self.text[self._emitted:]

    @property
    def opened_like_a_call(self) -> bool:
        """The reply began like a call written as text (a brace, a JSON fence, ``<tool_call>``) and
        nothing of it was shown."""
        return not self.streamed_text and _opening(self.text.lstrip()) == "lock"

    def _close_thinking(self) -> list[AgentEvent]:
        if self._thinking_closed:
            return []
        self._thinking_closed = True
        if not self._emit or not self._pending_thinking:
            self._pending_thinking = []
            return []
        out: list[AgentEvent] = [ThinkingDelta(delta=d) for d in self._pending_thinking]
        out.append(ThinkingEnd())
        self._pending_thinking = []
        return out

    def _text_events(self, *, final: bool) -> list[AgentEvent]:
        if not self._emit:
            return []
        end = self._safe_end(final)
        if end <= self._emitted:
            return []
        delta = self.text[self._emitted:end]
        self._emitted = end
        self.streamed_text += delta
        return [StreamDelta(delta=delta)]

    def _safe_end(self, final: bool) -> int:
        text = self.text
        if final:
            return len(text)
        if self._hold_all:
            return self._emitted
        if not self._holdback:
            return len(text)
        if self._locked:
            return self._emitted
        if self._emitted == 0:
            decision = _opening(text.lstrip())
            if decision == "stream" and self._hold_refusal:
                decision = _refusal_opening(text.lstrip(), self._openers)
            if decision == "lock":
                self._locked = True
                return 0
            if decision == "wait":
                return 0
            if self._hold_words and len(text.split()) <= self._hold_words:
                return 0
        match = _CALL_START.search(text, max(0, self._emitted - _TAIL))
        if match is not None:
            self._locked = True
            return max(self._emitted, match.start())
        # Hold back only from a character that could open a call (a brace, a tag, a fence);
        # plain prose streams without delay.
        tail_start = max(self._emitted, len(text) - _TAIL)
        opener = max(text.rfind(c, tail_start) for c in _OPENER_CHARS)
        while opener > self._emitted and text[opener] == "`" and text[opener - 1] == "`":
            opener -= 1  # hold a whole run of backticks: "``" then "`json" is one fence
        return opener if opener >= 0 else len(text)


REFUSAL_OPENERS = ("i'm sorry", "i am sorry", "sorry", "i can't", "i cannot", "i can not", "i'm unable",
                   "i am unable", "unfortunately", "i apologize", "i apologise")


def _refusal_opening(stripped: str, openers: tuple[str, ...] = REFUSAL_OPENERS) -> str:
    """"lock" for an answer that opens like a refusal (or another held opener), "wait" while it may
    still, else "stream"."""
    lower = stripped.lower().replace("\u2019", "'")
    if lower.startswith(openers):
        return "lock"
    return "wait" if any(r.startswith(lower) for r in openers) else "stream"


def _opening(stripped: str) -> str:
    """How to treat the start of an answer: "lock" (looks like a call), "wait" or "stream"."""
    if not stripped:
        return "wait"
    if stripped[0] == "{" or stripped.lower().startswith(_CALL_TAGS):
        return "lock"
    if stripped[0] == "[":
        rest = stripped[1:].lstrip()
        return "wait" if not rest else "lock" if rest[0] == "{" else "stream"
    if "```".startswith(stripped):
        return "wait"  # "`" or "``": a fence may be opening (Qwen streams "``" then "`json")
    if stripped.startswith("```"):
        if "\n" not in stripped or not stripped.split("\n", 1)[1].strip():
            return "wait"  # the fence's first line, or nothing after it yet: what follows decides
        return "lock" if _CALL_START.match(stripped) else "stream"
    if stripped[0] == "<" and any(tag.startswith(stripped.lower()) for tag in _CALL_TAGS):
        return "wait"
    return "stream"
