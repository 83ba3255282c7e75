"""When extraction runs: after session creation (hook), every 5 minutes (beat), on demand."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import structlog
from django.db import transaction
from django.utils import timezone

from memory_app import selectors
from memory_app.models import MemorySummary

log = structlog.get_logger(__name__)

# A stale summary younger than this is probably being rebuilt right now.
SUMMARY_GRACE = timedelta(minutes=2)


def _enqueue(task: Any, *args: Any) -> None:
    def send() -> None:
        try:
            task.delay(*args)
        except Exception:  # noqa: BLE001 - a broker hiccup: the beat sweep tries again
            log.exception("memory_enqueue_failed", task=task.name)

    transaction.on_commit(send)


def enqueue_stale(*, user_id: int | None = None) -> int:
    """Enqueue ``memory.extract_session`` per stale session and ``memory.rebuild_summary`` per
    stale summary (on commit). Returns the number of sessions enqueued."""
    from memory_app.tasks import extract_session, rebuild_summary

    session_ids = selectors.stale_sessions(user_id=user_id)
    for session_id in session_ids:
        _enqueue(extract_session, str(session_id))
    summaries = MemorySummary.objects.filter(stale=True, updated_at__lt=timezone.now() - SUMMARY_GRACE)
    if user_id is not None:
        summaries = summaries.filter(user_id=user_id)
    for uid in summaries.values_list("user_id", flat=True)[:200]:
        _enqueue(rebuild_summary, uid)
    if session_ids:
        log.info("memory_stale_sessions_enqueued", count=len(session_ids), user_id=user_id)
    return len(session_ids)


def on_session_created(session: Any) -> None:
    """sessions_app hook: a new session is a good moment to mine the user's idle ones."""
    from memory_app.tasks import process_stale_sessions

    _enqueue(process_stale_sessions, session.owner_id)
