"""Reads of ToolConfig, cached briefly so the registry can ask on every call.

The ORM is synchronous: ``tool_configs()`` only touches the database outside a
running event loop; async callers refresh through ``atool_configs()`` first.
A missing table (before ``migrate``) means "no overrides".
"""
from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

import structlog
from asgiref.sync import sync_to_async
from django.db import DatabaseError

from navi_site.db_connections import reconnecting

log = structlog.get_logger(__name__)

CACHE_SECONDS = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolConfigView:
    name: str
    enabled_globally: bool
    allow_for_non_staff: bool


_lock = threading.Lock()
_cache: dict[str, ToolConfigView] = {}
_loaded_at: float | None = None


def _fresh() -> bool:
    return _loaded_at is not None and time.monotonic() - _loaded_at < CACHE_SECONDS


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@reconnecting
def _rows() -> list[tuple[str, bool, bool]]:
    """Read once more on a new connection when PostgreSQL dropped this thread's: failing open on a
    connection that merely died would enable, for ``CACHE_SECONDS``, tools an admin switched off."""
    from tools_app.models import ToolConfig

    return list(ToolConfig.objects.values_list("name", "enabled_globally", "allow_for_non_staff"))


def _load() -> dict[str, ToolConfigView]:
    try:
        rows = _rows()
    # Table not migrated yet, database down, or DB access blocked (pytest-django raises
    # RuntimeError): no overrides. Fail-open is deliberate: a missing switch row means "enabled".
    except (DatabaseError, RuntimeError) as exc:
        log.debug("tool_config_unavailable", error=str(exc))
        return {}
    return {name: ToolConfigView(name=name, enabled_globally=en, allow_for_non_staff=ns) for name, en, ns in rows}


def tool_configs() -> dict[str, ToolConfigView]:
    """The overrides by tool name; inside an event loop, the last cached value (never blocks on the DB)."""
    global _cache, _loaded_at
    if _fresh() or _in_event_loop():
        return _cache
    with _lock:
        _cache = _load()
        _loaded_at = time.monotonic()
    return _cache


async def atool_configs() -> dict[str, ToolConfigView]:
    """The overrides by tool name, refreshed from the database when the cache is stale."""
    if _fresh():
        return _cache
    return await sync_to_async(_refresh, thread_sensitive=True)()


def _refresh() -> dict[str, ToolConfigView]:
    global _cache, _loaded_at
    with _lock:
        _cache = _load()
        _loaded_at = time.monotonic()
    return _cache


def invalidate_tool_configs() -> None:
    """Forget the cache (called when a ToolConfig row is saved or deleted)."""
    global _loaded_at
    _loaded_at = None


def is_enabled_globally(name: str) -> bool:
    config = tool_configs().get(name)
    return config is None or config.enabled_globally


def allows_non_staff(name: str) -> bool:
    config = tool_configs().get(name)
    return config is not None and config.allow_for_non_staff
