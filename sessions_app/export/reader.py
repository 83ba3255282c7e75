"""Reading a session for export: pages of its display history and the renderers' driver."""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sessions_app.models import Message, Session
from sessions_app.selectors import DISPLAY

EXPORT_FORMAT = "navi.session"
EXPORT_VERSION = 1
PAGE = 250
FORMATS = ("md", "json", "html")
CONTENT_TYPES = {"md": "text/markdown; charset=utf-8", "json": "application/json; charset=utf-8",
                 "html": "text/html; charset=utf-8"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportContext:
    """What an export says besides the messages: the session, its todo list (the plan's steps) and
    the seq-numbered events of its last turn (None: not available in this process)."""

    session: Session
    todo: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] | None = None
    exported_at: Any = None


def pages(session: Session, *, page: int = PAGE) -> Iterator[list[Message]]:
    """The display history, oldest first, ``page`` rows at a time (index message_session_seq)."""
    after = 0
    while True:
        rows = list(Message.objects.filter(session=session, buffer__in=DISPLAY, seq__gt=after).order_by("seq")[:page])
        if not rows:
            return
        yield rows
        if len(rows) < page:
            return
        after = rows[-1].seq


def export_filename(session: Session, fmt: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", (session.title or "conversation").lower()).strip("-")[:60] or "conversation"
    return f"navi-{slug}-{str(session.id)[:8]}.{fmt}"


def last_turn_events(session_id: str) -> list[dict[str, Any]] | None:
    """The seq-numbered events of the running or last turn from the run registry's replay log
    (kept LOG_TTL_S after a turn ends); None when this process cannot see it."""
    from asgiref.sync import async_to_sync

    from sessions_app.runs import get_run_registry

    try:
        snapshot = async_to_sync(get_run_registry().snapshot)(session_id)
    except Exception:  # noqa: BLE001 - an export never fails for want of the replay log
        return None
    return list(snapshot.events)
