"""Running one tool call as a task while draining its event sink in real time.

A tool that runs a subagent (spawn_agent) or switches the profile puts events into
``current_event_sink``; the loop yields them while the tool still runs, subagent
tool events marked ``is_subagent=True``. Stop is cooperative: a subagent sees the
same stop event and ends by itself; a tool still running a moment after Stop is
abandoned (its task cancelled, which kills subprocess tools' processes).
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agent import ctx
from agent.events import AgentEvent, mark_subagent
from agent.llm.base import ToolCallRequest

STOP_GRACE_SECONDS = 1.0
POLL_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    success: bool
    text: str
    metadata: dict[str, Any]


def canonical(call: ToolCallRequest) -> tuple[str, str]:
    return call.name, json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=str)


async def execute_with_sink(
    registry: Any, call: ToolCallRequest, *, allowed: set[str], stop_event: asyncio.Event
) -> AsyncIterator[AgentEvent | ToolOutcome]:
    """Yield the tool's sink events as they come, then one ToolOutcome."""
    queue: asyncio.Queue[AgentEvent] = asyncio.Queue()
    token = ctx.current_event_sink.set(queue)
    try:
        task = asyncio.create_task(registry.execute(call.name, call.arguments, allowed=allowed))
    finally:
        ctx.current_event_sink.reset(token)
    abandon_at: float | None = None
    while not task.done():
        getter = asyncio.ensure_future(queue.get())
        done, _ = await asyncio.wait({task, getter}, timeout=POLL_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            yield mark_subagent(getter.result())
            continue
        getter.cancel()
        if stop_event.is_set():
            abandon_at = abandon_at or time.monotonic() + STOP_GRACE_SECONDS
            if time.monotonic() >= abandon_at:
                task.cancel()
                break
    while not queue.empty():
        yield mark_subagent(queue.get_nowait())
    if task.cancelled() or not task.done():
        yield ToolOutcome(success=False, text="Error: stopped by the user before the tool finished.", metadata={})
        return
    try:
        result = task.result()
    except asyncio.CancelledError:
        yield ToolOutcome(success=False, text="Error: stopped by the user before the tool finished.", metadata={})
        return
    yield ToolOutcome(success=result.success, text=result.for_model(), metadata=dict(result.metadata))
