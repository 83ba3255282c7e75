"""Extension points other apps fill (memory extraction on session creation, recall flags).

Kept here so the sessions app does not import memory_app / recall_app directly.
"""
from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import structlog
from django.db.models import QuerySet

from sessions_app.models import Session

log = structlog.get_logger(__name__)

_created_hooks: list[Callable[[Session], None]] = []
_flag_providers: list[Callable[[list[uuid.UUID]], dict[uuid.UUID, dict[str, Any]]]] = []
_filters: dict[str, Callable[[QuerySet[Session], Any], QuerySet[Session]]] = {}
_turn_finished: list[Callable[[str], None]] = []
_turn_ended: list[Callable[[TurnEnded], None]] = []
_turn_recovered: list[Callable[[str, datetime], bool]] = []


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnded:
    """How a turn of the run registry ended (``outcome``: success, max_iterations, stopped, error: …)."""

    session_id: str
    user_id: int | None
    is_recall: bool
    outcome: str
    content: str
    seconds: float
    run_id: str = ""


# WebSocket frame type -> async handler(payload, *, user, session_id); it raises NaviError to
# answer the client with an error event (the connection stays).
FrameHandler = Callable[..., Awaitable[None]]
_frame_handlers: dict[str, FrameHandler] = {}


def on_frame(kind: str, handler: FrameHandler) -> None:
    """Handle inbound WebSocket frames ``{"type": kind, ...}`` (e.g. approvals_app's "approval")."""
    _frame_handlers[kind] = handler


def frame_handler(kind: str) -> FrameHandler | None:
    return _frame_handlers.get(kind)


def frame_types() -> tuple[str, ...]:
    return tuple(_frame_handlers)


def on_session_created(hook: Callable[[Session], None]) -> None:
    if hook not in _created_hooks:
        _created_hooks.append(hook)


def on_turn_finished(hook: Callable[[str], None]) -> None:
    """``hook(session_id)`` runs (in a thread, may use the ORM) after every turn of a session ends."""
    if hook not in _turn_finished:
        _turn_finished.append(hook)


def on_turn_ended(hook: Callable[[TurnEnded], None]) -> None:
    """``hook(TurnEnded)`` runs (in a thread, may use the ORM) after every turn, with its outcome."""
    if hook not in _turn_ended:
        _turn_ended.append(hook)


def on_turn_recovered(hook: Callable[[str, datetime], bool]) -> None:
    """``hook(session_id, turn_started_at)`` runs (sync, may use the ORM) when a turn whose process died
    was closed as interrupted, before the session's clients are told. An app that owned the run (a
    recall) ends its own record there and returns True when it told the clients itself (so its
    ``recall_update`` reaches them before the ``session_sync``, as spec 004 orders them)."""
    if hook not in _turn_recovered:
        _turn_recovered.append(hook)


def run_turn_recovered_hooks(session_id: str, started_at: datetime) -> bool:
    """Whether a hook told the session's clients; a hook that fails is logged and counts as not."""
    told = False
    for hook in _turn_recovered:
        try:
            told = bool(hook(session_id, started_at)) or told
        except Exception:  # noqa: BLE001 - one app's failure must not keep the turn from being closed
            log.exception("turn_recovered_hook_failed", hook=getattr(hook, "__qualname__", repr(hook)))
    return told


def run_turn_finished_hooks(session_id: str, ended: TurnEnded | None = None) -> None:
    """Run every hook; one that fails is logged and does not keep the others from running."""
    calls: list[partial[None]] = [partial(hook, session_id) for hook in _turn_finished]
    if ended is not None:
        calls += [partial(ended_hook, ended) for ended_hook in _turn_ended]
    for call in calls:
        try:
            call()
        except Exception:
            log.exception("turn_finished_hook_failed", session_id=session_id, hook=repr(call.func))


def add_flag_provider(provider: Callable[[list[uuid.UUID]], dict[uuid.UUID, dict[str, Any]]]) -> None:
    if provider not in _flag_providers:
        _flag_providers.append(provider)


def add_filter(name: str, fn: Callable[[QuerySet[Session], Any], QuerySet[Session]]) -> None:
    _filters[name] = fn


def run_session_created_hooks(session: Session) -> None:
    for hook in _created_hooks:
        hook(session)


def session_flags(ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    ids = list(ids)
    merged: dict[uuid.UUID, dict[str, Any]] = {}
    for provider in _flag_providers:
        for sid, flags in provider(ids).items():
            merged.setdefault(sid, {}).update(flags)
    return merged


def filter_sessions(qs: QuerySet[Session], **params: Any) -> QuerySet[Session]:
    for name, value in params.items():
        if value is not None and name in _filters:
            qs = _filters[name](qs, value)
    return qs
