"""Celery tasks of the sessions app."""
from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(name="sessions.publish_event", ignore_result=True)
def publish_event(session_id: str, event: dict[str, Any]) -> None:
    """Deliver one event to every client of a session (works from any worker process)."""
    from sessions_app.bus import publish

    publish(session_id, event)
