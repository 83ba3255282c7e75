"""Running a headless (recall) turn through the run registry, from async code or a worker thread."""
from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from sessions_app import bus
from sessions_app.runs import hooks
from sessions_app.runs.instance import get_run_registry
from sessions_app.runs.registry import SessionBusy, TurnRequest, TurnResult

log = structlog.get_logger(__name__)


async def run_recall_turn(session_id: str, *, user_id: int, content: str, is_recall: bool = True,
                          on_end: Callable[[TurnResult], Awaitable[None]] | None = None,
                          rules: Any = None) -> str:
    """Run one turn in the session like a user message would, so clients attach and replay.

    Returns "busy" (nothing ran), "success", "max_iterations", "stopped", "time_limit" or
    "error: <message>". ``on_end(result)`` is awaited when the turn has ended, before its final
    ``session_sync``. ``rules``: the run's own rules (``agent.gate.RunRules``: allowlist, limits,
    deny or park).
    """
    registry = get_run_registry()
    if await registry.ais_busy(session_id):
        return "busy"
    role = await hooks.user_role(user_id)
    request = TurnRequest(session_id=str(session_id), text=content, user_id=user_id, user_role=role,
                          is_recall=is_recall, on_end=on_end, rules=rules)
    try:
        result = await registry.run_turn(request)
    except SessionBusy:
        return "busy"
    return result.outcome


def run_recall_turn_blocking(
    session_id: str, *, user_id: int, content: str, is_recall: bool = True, timeout: float | None = None,
    rules: Any = None,
) -> str:
    """Sync entry point for Celery tasks.

    Embedded mode: the turn must run on the server's event loop (the in-memory channel
    layer and the registry live there), so the coroutine is handed to that loop and this
    thread waits. Without a running server loop (a scale-out worker process, a management
    command) the turn runs in a fresh event loop in this thread.
    """
    coro = run_recall_turn(session_id, user_id=user_id, content=content, is_recall=is_recall, rules=rules)
    loop = bus.server_loop()
    if loop is not None and loop.is_running() and not loop.is_closed():
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("run_recall_turn_blocking() called on the server loop: await run_recall_turn().")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            log.warning("recall_turn_wait_timeout", session_id=session_id)
            return "error: the recall turn did not finish in time (it keeps running)"
    return asyncio.run(coro)
