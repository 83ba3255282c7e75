"""Context compression (spec 002 "Context Compression").

Keep the last ``keep_recent`` turns verbatim (a turn starts at a user message; a
tool-call group is never split), format the older ones as text (tool args cut to
120 chars, results to 300, the whole input capped at 12 000 chars), summarise with
the same model (think=False), and replace them by one ``role=user, is_summary``
message. Only the context buffer changes.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from agent.llm.base import ChatMessage, LLMBackend
from agent.store import StoredMessage

ARGS_LIMIT = 120
RESULT_LIMIT = 300
INPUT_LIMIT = 12_000
SUMMARY_PREFIX = "[Summary of the earlier conversation]\n"

SUMMARY_PROMPT = """\
Summarise the earlier part of a conversation between a user and their AI assistant so the
assistant can continue without it. Write concise bullet points: the user's goals and requests,
decisions made, facts learned (names, paths, hosts, numbers), tool results that still matter,
and open tasks. Do not add anything that is not in the text."""


@dataclass(frozen=True, slots=True)
class Split:
    old: list[StoredMessage]
    recent: list[StoredMessage]


def should_compress(token_count: int, num_ctx: int, threshold: float) -> bool:
    return num_ctx > 0 and token_count >= num_ctx * threshold


def split_turns(context: Sequence[StoredMessage], keep_recent: int) -> Split:
    """Old messages to summarise and recent turns to keep (a previous summary counts as old)."""
    starts = [
        i for i, m in enumerate(context)
        if m.message.role == "user" and not m.message.is_summary and not m.message.metadata.get("synthetic")
    ]
    if len(starts) <= keep_recent:
        return Split(old=[], recent=list(context))
    cut = starts[-keep_recent] if keep_recent > 0 else len(context)
    return Split(old=list(context[:cut]), recent=list(context[cut:]))


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_old(messages: Sequence[StoredMessage]) -> str:
    lines: list[str] = []
    for stored in messages:
        m = stored.message
        if m.is_summary:
            lines.append(f"Earlier summary:\n{m.content or ''}")
        elif m.role == "user":
            lines.append(f"User: {m.content or ''}" + (" [image]" * len(m.images)))
        elif m.role == "assistant":
            if m.content:
                lines.append(f"Assistant: {m.content}")
            for call in m.tool_calls:
                lines.append(f"Tool call {call.name}({_clip(json.dumps(call.arguments, ensure_ascii=False), ARGS_LIMIT)})")
        elif m.role == "tool":
            lines.append(f"Tool result {m.name or ''}: {_clip(m.content or '', RESULT_LIMIT)}")
    text = "\n".join(lines)
    if len(text) > INPUT_LIMIT:  # keep the most recent part: it matters most for what follows
        text = "…" + text[-(INPUT_LIMIT - 1):]
    return text


async def summarise(backend: LLMBackend, *, model: str, text: str, temperature: float, num_ctx: int | None) -> str:
    completion = await backend.complete(
        [ChatMessage(role="system", content=SUMMARY_PROMPT), ChatMessage(role="user", content=text)],
        model=model, think=False, temperature=temperature, num_ctx=num_ctx,
    )
    return completion.text.strip()


def summary_message(summary: str) -> ChatMessage:
    return ChatMessage(role="user", content=SUMMARY_PREFIX + summary, is_summary=True)
