"""Small ORM/Celery helpers the run registry calls (kept apart so the registry stays storage-free)."""
from __future__ import annotations

from channels.db import database_sync_to_async

from sessions_app import enqueue


@database_sync_to_async
def is_first_turn(session_id: str) -> bool:
    """True when the session has exactly one user message and still no title."""
    from sessions_app.models import Message, Session

    if not Session.objects.filter(pk=session_id, title="").exists():
        return False
    return Message.objects.filter(session_id=session_id, role=Message.Role.USER).count() == 1


@database_sync_to_async
def schedule_title(session_id: str) -> None:
    enqueue.generate_title_now(str(session_id))


@database_sync_to_async
def user_role(user_id: int) -> str:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id).only("is_staff").first()
    return "staff" if user is not None and user.is_staff else "user"
