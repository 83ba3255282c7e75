"""Publishing events to a session's channel-layer group, from any thread or process.

Every client of a session (tabs, phones) joins the group ``session_<uuid hex>``.
In embedded mode the in-memory channel layer is bound to the server's event loop,
so work running in another thread (a Celery worker thread) hands the send to that
loop with ``run_coroutine_threadsafe`` instead of touching the layer's queues from
a foreign loop. In scale-out mode (Redis layer) any thread or process may send.
"""
from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

_server_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def group_name(session_id: str | uuid.UUID) -> str:
    return "session_" + uuid.UUID(str(session_id)).hex


def register_server_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Called once by the embedded server when its event loop runs."""
    global _server_loop
    with _lock:
        _server_loop = loop


def server_loop() -> asyncio.AbstractEventLoop | None:
    return _server_loop


async def apublish(session_id: str | uuid.UUID, event: dict[str, Any]) -> None:
    """Send one event dict to every subscriber of the session (from async code)."""
    layer = get_channel_layer()
    if layer is None:
        return
    loop = asyncio.get_running_loop()
    target = _server_loop
    if target is not None and target is not loop and _is_in_memory(layer):
        fut = asyncio.run_coroutine_threadsafe(_send(layer, session_id, event), target)
        await asyncio.wrap_future(fut)
        return
    await _send(layer, session_id, event)


def publish(session_id: str | uuid.UUID, event: dict[str, Any], *, timeout: float = 10.0) -> None:
    """Send one event dict to every subscriber of the session (from sync code, any thread)."""
    layer = get_channel_layer()
    if layer is None:
        return
    target = _server_loop
    if target is not None and _is_in_memory(layer) and target.is_running():
        asyncio.run_coroutine_threadsafe(_send(layer, session_id, event), target).result(timeout)
        return
    async_to_sync(_send)(layer, session_id, event)


def redis_publication(session_id: str | uuid.UUID, event: dict[str, Any], *, redis_url: str) -> tuple[str, bytes] | None:
    """(channel, payload) of the PUBLISH that ``apublish`` would send for this event to the Redis
    at ``redis_url``, so that the run writer can send it in the same command as the event's log
    entry; None with the in-memory layer, a layer on another Redis or a sharded one. Raises what
    the layer's encoding raises. Call from async code."""
    publication = getattr(get_channel_layer(), "publication", None)
    if publication is None:
        return None
    return publication(group_name(session_id), {"type": "session.event", "event": event},  # type: ignore[no-any-return]
                       redis_url=redis_url)


def can_publish_now() -> bool:
    """Whether ``publish_now`` can send from this thread: the in-memory layer, on its loop."""
    layer = get_channel_layer()
    if layer is None:
        return True
    if not hasattr(layer, "group_send_now"):
        return False
    target = _server_loop
    if target is None:
        return True
    try:
        return asyncio.get_running_loop() is target
    except RuntimeError:
        return False


def publish_now(session_id: str | uuid.UUID, event: dict[str, Any]) -> None:
    """``apublish`` without a coroutine, where ``can_publish_now()``: embedded mode's timed
    delta flushes call it straight from a timer (no task per flush)."""
    layer = get_channel_layer()
    if layer is not None:
        layer.group_send_now(group_name(session_id), {"type": "session.event", "event": event})


async def _send(layer: Any, session_id: str | uuid.UUID, event: dict[str, Any]) -> None:
    await layer.group_send(group_name(session_id), {"type": "session.event", "event": event})


def _is_in_memory(layer: Any) -> bool:
    from channels.layers import InMemoryChannelLayer

    return isinstance(layer, InMemoryChannelLayer)
