"""When extraction runs: after session creation (hook), every 5 minutes (beat), on demand."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import structlog
from django.utils import timezone

from memory_app import enqueue, selectors
from memory_app.models import MemorySummary

log = structlog.get_logger(__name__)

# A stale summary younger than this is probably being rebuilt right now.
SUMMARY_GRACE = timedelta(minutes=2)


def enqueue_stale(*, user_id: int | None = None) -> int:
    """Enqueue ``memory.extract_session`` per stale session and ``memory.rebuild_summary`` per
    stale summary (on commit). Returns the number of sessions enqueued."""
    session_ids = selectors.stale_sessions(user_id=user_id)
    for session_id in session_ids:
        enqueue.extract_session_later(str(session_id))
    summaries = MemorySummary.objects.filter(stale=True, updated_at__lt=timezone.now() - SUMMARY_GRACE)
    if user_id is not None:
        summaries = summaries.filter(user_id=user_id)
    for uid in summaries.values_list("user_id", flat=True)[:200]:
        enqueue.rebuild_summary_later(uid)
    if session_ids:
        log.info("memory_stale_sessions_enqueued", count=len(session_ids), user_id=user_id)
    return len(session_ids)


def on_session_created(session: Any) -> None:
    """sessions_app hook: a new session is a good moment to mine the user's idle ones."""
    enqueue.process_stale_sessions_later(session.owner_id)
