"""The one place a turn's events get their seq, enter the replay log and fan out.

Text deltas (``thinking_delta``, ``stream_delta``) are merged within a short window
(WS_DELTA_COALESCE_MS) *before* they are numbered, so replay and live clients see
exactly the same events. A pending delta is flushed before any other event, when the
window closes, and at the end of the turn: text and order never change.
"""
from __future__ import annotations

import time
from typing import Any

import structlog

from sessions_app.runs.store import RunStore

log = structlog.get_logger(__name__)

DELTA_TYPES = frozenset({"thinking_delta", "stream_delta"})


class EventWriter:
    """Numbers, logs and publishes the events of one run (single writer per session)."""

    def __init__(self, store: RunStore, session_id: str, run_id: str, *, coalesce_ms: int, first_seq: int) -> None:
        self.store = store
        self.session_id = session_id
        self.run_id = run_id
        self.window = max(0, coalesce_ms) / 1000.0
        self.seq = first_seq
        self._pending: dict[str, Any] | None = None
        self._pending_parts: list[str] = []
        self._pending_since = 0.0
        self.log = log.bind(session_id=session_id, run_id=run_id)

    @property
    def deadline(self) -> float | None:
        """When the pending delta must go out (monotonic seconds), or None."""
        return None if self._pending is None else self._pending_since + self.window

    async def push(self, event: dict[str, Any]) -> None:
        """Accept one event (a ``to_dict()``); deltas may wait up to the window."""
        kind = event.get("type")
        if kind in DELTA_TYPES and self.window > 0:
            if self._pending is not None and self._pending["type"] == kind:
                self._pending_parts.append(event["delta"])
                return
            await self.flush()
            self._pending = dict(event)
            self._pending_parts = [event["delta"]]
            self._pending_since = time.monotonic()
            return
        await self.flush()
        await self._emit(event)

    async def flush(self) -> None:
        if self._pending is None:
            return
        await self._emit(self._take_pending())

    def flush_now(self) -> bool:
        """``flush`` without awaiting, when the log and the fan-out live in this process and
        loop (embedded mode): a timer can then close a window without starting a task. False,
        with nothing done, when they do not (the caller awaits ``flush``)."""
        from sessions_app.bus import can_publish_now, publish_now

        if self._pending is None:
            return True
        append_now = getattr(self.store, "append_now", None)
        if append_now is None or not can_publish_now():
            return False
        numbered = self._number(self._take_pending())
        append_now(self.session_id, self.seq, numbered)
        try:
            publish_now(self.session_id, numbered)
        except Exception:
            self.log.exception("run_fanout_failed", seq=self.seq)
        return True

    def _take_pending(self) -> dict[str, Any]:
        assert self._pending is not None
        event = self._pending
        event["delta"] = "".join(self._pending_parts)
        self._pending = None
        self._pending_parts = []
        return event

    def _number(self, event: dict[str, Any]) -> dict[str, Any]:
        self.seq += 1
        return {**event, "seq": self.seq}

    async def _emit(self, event: dict[str, Any]) -> None:
        from sessions_app.bus import apublish, redis_publication

        numbered = self._number(event)
        fused = getattr(self.store, "append_and_publish", None)
        target = None
        if fused is not None:  # scale-out: with the layer on the store's Redis, one command
            try:
                target = redis_publication(self.session_id, numbered, redis_url=self.store.url)  # type: ignore[attr-defined]
            except Exception:  # the layer cannot encode it (msgpack: integers beyond 64 bits, lone
                pass  # surrogates): log it as JSON below; its publish fails and is logged
        if target is not None:
            try:
                await fused(self.session_id, self.seq, numbered, *target)
                return
            except Exception:  # Redis hiccup: live clients may still get the event below
                self.log.exception("run_log_append_failed", seq=self.seq)
        else:
            # Log first, then fan out: a client that joined the group after the send finds
            # the event in the log; one that joined before gets it live (deduped by seq).
            try:
                await self.store.append(self.session_id, self.seq, numbered)
            except Exception:  # Redis hiccup: live clients still get the event
                self.log.exception("run_log_append_failed", seq=self.seq)
        try:
            await apublish(self.session_id, numbered)
        except Exception:
            self.log.exception("run_fanout_failed", seq=self.seq)
