"""Celery tasks of the memory app. They take ids and call services; each is safe to run twice."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="memory.extract_session", ignore_result=True)
def extract_session(session_id: str) -> str:
    """Mine one idle session for facts (a claimed or already processed session is a no-op)."""
    from memory_app.extraction import extract_session as run

    return run(session_id).status


@shared_task(name="memory.process_stale_sessions", ignore_result=True)
def process_stale_sessions(user_id: int | None = None) -> int:
    """Enqueue extraction for idle unprocessed sessions (of one user, or everyone) and
    rebuilds of summaries left stale; returns how many sessions were enqueued."""
    from memory_app.scheduling import enqueue_stale

    return enqueue_stale(user_id=user_id)


@shared_task(name="memory.rebuild_summary", ignore_result=True)
def rebuild_summary(user_id: int) -> None:
    """Rewrite the user's narrative summary if their facts changed since it was written."""
    from memory_app.summary import summary_rebuild

    summary_rebuild(user_id=user_id)
