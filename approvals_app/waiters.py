"""In-process wake-ups for calls waiting on an approval.

A decision is a database write (``services``); the waiting run notices it by reading the row.
When the run waits in this process, ``wake`` makes it read at once instead of at its next poll
(the poll is what finds decisions made in another process in scale-out mode). Thread-safe:
decisions are made in worker threads, runs wait on their event loop.
"""
from __future__ import annotations

import asyncio
import threading

_lock = threading.Lock()
_waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}


def register(approval_id: str) -> asyncio.Event:
    """An event set when ``wake(approval_id)`` is called (call on the waiting run's loop)."""
    event = asyncio.Event()
    with _lock:
        _waiting.setdefault(str(approval_id), []).append((asyncio.get_running_loop(), event))
    return event


def unregister(approval_id: str, event: asyncio.Event) -> None:
    with _lock:
        entries = [e for e in _waiting.get(str(approval_id), []) if e[1] is not event]
        if entries:
            _waiting[str(approval_id)] = entries
        else:
            _waiting.pop(str(approval_id), None)


def wake(approval_id: str) -> None:
    with _lock:
        entries = list(_waiting.get(str(approval_id), []))
    for loop, event in entries:
        if not loop.is_closed():
            loop.call_soon_threadsafe(event.set)
