"""The run registry (see registry.py): one active turn per session, replay, cross-process stop.

Public API::

    registry = get_run_registry()
    run = await registry.start_turn(TurnRequest(...))      # raises SessionBusy
    result = await registry.run_turn(TurnRequest(...))     # waits; TurnResult
    await registry.snapshot(session_id) -> Snapshot(active, events, last_seq)
    await registry.tail(session_id, after) -> Snapshot   # logged events with seq > after
    is_busy(session_id) / await ais_busy(session_id)
    request_stop(session_id) / await arequest_stop(session_id) -> bool
    await registry.steer(session_id, content=, user_id=, ref=) -> SteerItem | None   # None: no run
    await registry.withdraw_steer(session_id, steer_id) -> SteerItem | None; registry.pending_steers(sid)
    await run_recall_turn(session_id, user_id=, content=, is_recall=True) -> outcome
    run_recall_turn_blocking(session_id, user_id=, content=, is_recall=True) -> outcome
"""
from __future__ import annotations

from sessions_app.runs.instance import (
    ais_busy,
    arequest_stop,
    get_run_registry,
    is_busy,
    request_stop,
    set_run_registry,
)
from sessions_app.runs.recall import run_recall_turn, run_recall_turn_blocking
from sessions_app.runs.registry import (
    BUSY_MESSAGE,
    RunRegistry,
    SessionBusy,
    SteerRefused,
    TurnRequest,
    TurnResult,
)
from sessions_app.runs.store import LocalStore, RedisStore, Snapshot

__all__ = [
    "BUSY_MESSAGE", "LocalStore", "RedisStore", "RunRegistry", "SessionBusy", "Snapshot", "SteerRefused", "TurnRequest",
    "TurnResult", "ais_busy", "arequest_stop", "get_run_registry", "is_busy", "request_stop",
    "run_recall_turn", "run_recall_turn_blocking", "set_run_registry",
]
