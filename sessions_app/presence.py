"""Who is watching a session: its open clients (browser tabs, a Telegram chat streaming a turn)
and whether each is visible. Notifications use it: a turn that ends while a visible tab shows
it needs no push; an approval in a hidden or closed tab does.

A client joins with ``ajoin`` (visible unless it says otherwise), reports ``aset_visible`` when
the page is hidden or shown again (the ``visibility`` frame), refreshes every REFRESH_S while
connected and leaves on disconnect. ``watching(session_id)`` answers from any thread.
``on_unwatched(hook)``: called when a client hides or leaves and no visible one is left.

Embedded: a dict in this process. Scale-out: one Redis hash per session
(``navi:presence:<sid>``, field = client id, value = ``"<0|1>:<expires epoch>"``): an entry
whose process died without leaving expires after TTL_S, so a crashed server never keeps a
session "watched" for long.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)

TTL_S = 90.0
REFRESH_S = 30.0


@dataclass(frozen=True, slots=True)
class Watching:
    clients: int = 0
    visible: int = 0


class LocalPresence:
    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, bool]] = {}
        self._lock = threading.Lock()

    def set(self, session_id: str, client_id: str, visible: bool) -> None:
        with self._lock:
            self._sessions.setdefault(session_id, {})[client_id] = visible

    def leave(self, session_id: str, client_id: str) -> None:
        with self._lock:
            clients = self._sessions.get(session_id)
            if clients is not None:
                clients.pop(client_id, None)
                if not clients:
                    del self._sessions[session_id]

    def watching(self, session_id: str) -> Watching:
        with self._lock:
            clients = dict(self._sessions.get(session_id, {}))
        return Watching(clients=len(clients), visible=sum(clients.values()))


class RedisPresence:
    def __init__(self, url: str) -> None:
        import redis

        self._redis = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)

    @staticmethod
    def _key(session_id: str) -> str:
        return f"navi:presence:{session_id}"

    def set(self, session_id: str, client_id: str, visible: bool) -> None:
        key = self._key(session_id)
        pipe = self._redis.pipeline(transaction=False)
        pipe.hset(key, client_id, f"{int(visible)}:{time.time() + TTL_S:.0f}")
        pipe.expire(key, int(TTL_S * 2))
        pipe.execute()

    def leave(self, session_id: str, client_id: str) -> None:
        self._redis.hdel(self._key(session_id), client_id)

    def watching(self, session_id: str, *, now: float | None = None) -> Watching:
        now = time.time() if now is None else now
        clients = visible = 0
        for raw in self._redis.hvals(self._key(session_id)):
            flag, _, expires = raw.decode().partition(":")
            if float(expires or 0) < now:
                continue
            clients += 1
            visible += flag == "1"
        return Watching(clients=clients, visible=visible)


_backend: LocalPresence | RedisPresence | None = None
_backend_lock = threading.Lock()


def backend() -> LocalPresence | RedisPresence:
    global _backend
    if _backend is None:
        with _backend_lock:
            if _backend is None:
                from django.conf import settings

                url = getattr(settings, "REDIS_URL", "")
                _backend = RedisPresence(url) if url else LocalPresence()
    return _backend


def watching(session_id: str) -> Watching:
    """How many clients watch the session, and how many of them are visible. Any thread."""
    return backend().watching(str(session_id))


async def _off_loop(fn: Any, *args: Any) -> None:
    store = backend()
    if isinstance(store, LocalPresence):
        fn(*args)
    else:  # a Redis round trip: not on the server's loop
        await asyncio.to_thread(fn, *args)


_unwatched: list[Callable[[str], None]] = []


def on_unwatched(hook: Callable[[str], None]) -> None:
    """``hook(session_id)`` runs (in a thread, may use the ORM) when a client hides its page or leaves
    and no visible client of the session is left (notify_app: an approval nobody sees any more)."""
    if hook not in _unwatched:
        _unwatched.append(hook)


def _run_unwatched(session_id: str) -> None:
    if watching(session_id).visible:
        return
    for hook in list(_unwatched):
        try:
            hook(session_id)
        except Exception:  # noqa: BLE001 - a notification must never break a connection's close
            log.exception("presence_unwatched_hook_failed", session_id=session_id, hook=repr(hook))


async def _unwatched_now(session_id: str) -> None:
    if _unwatched:
        from channels.db import database_sync_to_async

        await database_sync_to_async(_run_unwatched, thread_sensitive=False)(session_id)


async def aset(session_id: str, client_id: str, *, visible: bool) -> None:
    """Join, refresh or report visibility (from async code)."""
    await _off_loop(backend().set, str(session_id), client_id, visible)
    if not visible:
        await _unwatched_now(str(session_id))


async def aleave(session_id: str, client_id: str) -> None:
    await _off_loop(backend().leave, str(session_id), client_id)
    await _unwatched_now(str(session_id))
