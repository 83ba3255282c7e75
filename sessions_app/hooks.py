"""Extension points other apps fill (memory extraction on session creation, recall flags).

Kept here so the sessions app does not import memory_app / recall_app directly.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from django.db.models import QuerySet

from sessions_app.models import Session

_created_hooks: list[Callable[[Session], None]] = []
_flag_providers: list[Callable[[list[uuid.UUID]], dict[uuid.UUID, dict[str, Any]]]] = []
_filters: dict[str, Callable[[QuerySet[Session], Any], QuerySet[Session]]] = {}
_turn_finished: list[Callable[[str], None]] = []


def on_session_created(hook: Callable[[Session], None]) -> None:
    if hook not in _created_hooks:
        _created_hooks.append(hook)


def on_turn_finished(hook: Callable[[str], None]) -> None:
    """``hook(session_id)`` runs (in a thread, may use the ORM) after every turn of a session ends."""
    if hook not in _turn_finished:
        _turn_finished.append(hook)


def run_turn_finished_hooks(session_id: str) -> None:
    for hook in _turn_finished:
        hook(session_id)


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
