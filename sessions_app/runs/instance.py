"""The process-wide run registry and the module-level helpers that reach it from any thread."""
from __future__ import annotations

import threading

from sessions_app.runs.registry import RunRegistry

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
