"""Where the memory app enqueues its Celery tasks (by name, on commit: see navi_site.enqueue)."""
from __future__ import annotations

from navi_site.enqueue import send_after_commit


def extract_session_later(session_id: str) -> None:
    send_after_commit("memory.extract_session", str(session_id))


def process_stale_sessions_later(user_id: int | None) -> None:
    send_after_commit("memory.process_stale_sessions", user_id)


def rebuild_summary_later(user_id: int) -> None:
    send_after_commit("memory.rebuild_summary", user_id)
