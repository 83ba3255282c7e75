"""Celery tasks of the sessions app."""
from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(name="sessions.publish_event", ignore_result=True)
def publish_event(session_id: str, event: dict[str, Any]) -> None:
    """Deliver one event to every client of a session (works from any worker process)."""
    from sessions_app.bus import publish

    publish(session_id, event)


@shared_task(name="sessions.generate_title", ignore_result=True)
def generate_title(session_id: str) -> None:
    """Title an untitled session from its first turn; then clients reload (session_sync)."""
    import structlog

    from sessions_app.bus import publish
    from sessions_app.runs import is_busy
    from sessions_app.titles import title_generate

    try:
        title = title_generate(session_id=session_id)
    except Exception as exc:  # the model is down: the session simply stays untitled
        structlog.get_logger(__name__).warning("session_title_failed", session_id=session_id, error=str(exc))
        return
    if title and not is_busy(session_id):  # never disturb a running turn's stream
        publish(session_id, {"type": "session_sync"})


@shared_task(name="sessions.purge_files", ignore_result=True)
def purge_files() -> int:
    """Delete uploads older than SESSION_FILES_TTL_HOURS (beat, hourly)."""
    from sessions_app.files import files_purge

    return files_purge()


@shared_task(name="sessions.recover_turns", ignore_result=True)
def recover_turns() -> int:
    """Close turns whose process died (lease ran out) as interrupted (beat; start-up does it too)."""
    from sessions_app.runs.recovery import recover_turns

    return len(recover_turns())
