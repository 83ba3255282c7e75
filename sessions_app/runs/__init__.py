"""The run registry (see registry.py): one active turn per session, replay, cross-process stop.

Public API::

    registry = get_run_registry()
    run = await registry.start_turn(TurnRequest(...))      # raises SessionBusy
    result = await registry.run_turn(TurnRequest(...))     # waits; TurnResult
    await registry.snapshot(session_id) -> Snapshot(active, events, last_seq)
    await registry.tail(session_id, after) -> Snapshot   # logged events with seq > after
    is_busy(session_id) / await ais_busy(session_id)
    request_stop(session_id) / await arequest_stop(session_id) -> bool
    await run_recall_turn(session_id, user_id=, content=, is_recall=True) -> outcome
    run_recall_turn_blocking(session_id, user_id=, content=, is_recall=True) -> outcome
"""
from __future__ import annotations

import threading

from sessions_app.runs.recall import run_recall_turn, run_recall_turn_blocking
from sessions_app.runs.registry import BUSY_MESSAGE, RunRegistry, SessionBusy, TurnRequest, TurnResult
from sessions_app.runs.store import LocalStore, RedisStore, Snapshot

__all__ = [
    "BUSY_MESSAGE", "LocalStore", "RedisStore", "RunRegistry", "SessionBusy", "Snapshot", "TurnRequest",
    "TurnResult", "ais_busy", "arequest_stop", "get_run_registry", "is_busy", "request_stop",
    "run_recall_turn", "run_recall_turn_blocking", "set_run_registry",
]

_registry: RunRegistry | None = None
_lock = threading.Lock()


def get_run_registry() -> RunRegistry:
    """The process-wide registry (LocalStore embedded, RedisStore when REDIS_URL is set)."""
    global _registry
    if _registry is None:
        with _lock:
            if _registry is None:
                _registry = RunRegistry()
    return _registry


def set_run_registry(registry: RunRegistry | None) -> None:
    """Replace the singleton (tests: a registry with a scripted turn function)."""
    global _registry
    with _lock:
        _registry = registry


def is_busy(session_id: str) -> bool:
    """Is a turn running in the session (any process in scale-out)? Safe from any thread."""
    return get_run_registry().is_busy(str(session_id))


async def ais_busy(session_id: str) -> bool:
    return await get_run_registry().ais_busy(str(session_id))


def request_stop(session_id: str) -> bool:
    """Ask the session's run to stop (cooperatively). True when a run was active."""
    return get_run_registry().request_stop(str(session_id))


async def arequest_stop(session_id: str) -> bool:
    return await get_run_registry().arequest_stop(str(session_id))
