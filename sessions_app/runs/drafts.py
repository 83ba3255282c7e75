"""Durable turns: the running side. What a turn streams is kept, so a crash loses at most ~1 s.

The run registry registers a ``Draft`` for each run and feeds it the run's text and thinking
deltas (``Draft.see``: list appends, nothing else on the stream's path). A flusher task per
event loop writes every changed draft, and renews the leases of the loop's runs, in one
transaction at most once a second (``sessions_app.turns.running_turns_save``).

A draft holds the text streamed *since the last message the agent saved*: the session store
saves an assistant message and empties the draft under the draft's lock, in the transaction
that writes the message (``DjangoSessionStore.append``), and the flusher writes under the same
lock, so the database never holds a partial answer that is also a saved message.
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

import structlog
from asgiref.sync import sync_to_async

from sessions_app.turns import LEASE_REFRESH_S, Partial

log = structlog.get_logger(__name__)

FLUSH_S = 1.0


@dataclass(eq=False)
class Draft:
    session_id: str
    run_id: str
    loop: asyncio.AbstractEventLoop
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    dirty: bool = False
    opened: bool = False  # its RunningTurn row exists (created with the user message)
    stored: bool = False  # that row may hold a partial answer (written by a flush)
    error: str | None = None

    def see(self, event: dict[str, Any]) -> None:
        """One event of the run, as sent to clients."""
        kind = event.get("type")
        if kind == "stream_delta":
            self.text.append(str(event.get("delta") or ""))
            self.dirty = True
        elif kind == "thinking_delta":
            self.thinking.append(str(event.get("delta") or ""))
            self.dirty = True
        elif kind in ("stream_end", "stream_stopped"):
            self.consumed()  # the agent saved its answer (or the stopped part) before this event
        elif kind == "error" and self.error is None:
            self.error = str(event.get("message") or "error")

    def consumed(self) -> None:
        """The streamed text is now a saved message."""
        self.text, self.thinking, self.dirty = [], [], False

    def partial(self) -> Partial:
        return Partial(run_id=self.run_id, text="".join(self.text), thinking="".join(self.thinking))


_drafts: dict[str, Draft] = {}
_flushers: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}
_mutex = threading.Lock()


def register(session_id: str, run_id: str) -> Draft:
    """Start keeping a run's partial answer (call on the run's loop)."""
    loop = asyncio.get_running_loop()
    draft = Draft(session_id=session_id, run_id=run_id, loop=loop)
    with _mutex:
        _drafts[run_id] = draft
        if loop not in _flushers or _flushers[loop].done():
            _flushers[loop] = loop.create_task(_flush_forever(loop), name="navi-draft-flusher")
    return draft


def get(run_id: str) -> Draft | None:
    return _drafts.get(run_id)


def live_run_ids() -> set[str]:
    """The runs of this process (recovery must leave them alone)."""
    with _mutex:
        return set(_drafts)


async def finish(draft: Draft) -> None:
    """The run ended: delete its row, after writing the partial answer and the error if it failed.
    When the database cannot be reached the row stays and recovery closes the turn later."""
    from sessions_app.turns import running_turn_finish

    try:
        async with draft.lock:
            if draft.opened:
                error = draft.error
                await sync_to_async(running_turn_finish, thread_sensitive=False)(
                    run_id=draft.run_id, error=error, partial=draft.partial() if error is not None else None)
    except Exception:
        log.exception("turn_finish_failed", session_id=draft.session_id, run_id=draft.run_id)
    finally:
        with _mutex:
            _drafts.pop(draft.run_id, None)
            idle = not any(d.loop is draft.loop for d in _drafts.values())
            flusher = _flushers.pop(draft.loop, None) if idle else None
        if flusher is not None:
            flusher.cancel()


async def _flush_forever(loop: asyncio.AbstractEventLoop) -> None:
    since_renew = 0.0
    while True:
        await asyncio.sleep(FLUSH_S)
        since_renew += FLUSH_S
        renew = since_renew >= LEASE_REFRESH_S
        if renew:
            since_renew = 0.0
        try:
            await flush(loop, renew=renew)
        except Exception:  # the database is away: the next round tries again, recovery is the net
            log.warning("draft_flush_failed", exc_info=True)


async def flush(loop: asyncio.AbstractEventLoop | None = None, *, renew: bool = False) -> int:
    """Write the changed drafts of ``loop``'s runs (and renew their leases); returns how many."""
    from sessions_app.turns import running_turns_save

    loop = loop or asyncio.get_running_loop()
    with _mutex:
        mine = [d for d in _drafts.values() if d.loop is loop and d.opened]
    held: list[Draft] = []
    try:
        for draft in mine:
            if draft.lock.locked():  # the agent is saving a message right now: next round
                continue
            await draft.lock.acquire()  # free: returns without suspending
            held.append(draft)
        partials = [d.partial() for d in held if d.dirty]
        if not partials and not renew:
            return 0
        for draft in held:
            if draft.dirty:
                draft.dirty, draft.stored = False, True
        try:
            await sync_to_async(running_turns_save, thread_sensitive=False)(
                partials=partials, renew=[d.run_id for d in held] if renew else [])
        except BaseException:
            for draft in held:
                draft.dirty = draft.dirty or bool(draft.text or draft.thinking)
            raise
        return len(partials)
    finally:
        for draft in held:
            draft.lock.release()


def flush_all_blocking(timeout: float = 5.0) -> None:
    """Write every draft of this process now (graceful shutdown, best effort). Callable from an event
    loop's thread: the write happens in a thread of its own (the ORM refuses to run on a loop)."""
    from sessions_app.turns import running_turns_save

    with _mutex:
        partials = [d.partial() for d in _drafts.values() if d.opened and d.dirty and not d.lock.locked()]
    if not partials:
        return

    def write() -> None:
        try:
            running_turns_save(partials=partials, renew=[])
        except Exception:
            log.warning("draft_flush_at_exit_failed", exc_info=True)
        finally:
            from django.db import connections

            connections.close_all()

    writer = threading.Thread(target=write, name="navi-draft-flush", daemon=True)
    writer.start()
    writer.join(timeout)
