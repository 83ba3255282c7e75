"""Where the sessions app enqueues its Celery tasks (by name: see navi_site.enqueue)."""
from __future__ import annotations

from navi_site.enqueue import send


def generate_title_now(session_id: str) -> None:
    """Send ``sessions.generate_title`` at once (the first turn has already been saved)."""
    send("sessions.generate_title", str(session_id))
