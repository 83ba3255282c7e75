"""Reads of sessions and messages (indexed queries only)."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from sessions_app.models import Message, Session

DISPLAY = (Message.Buffer.BOTH, Message.Buffer.MESSAGES)
CONTEXT = (Message.Buffer.BOTH, Message.Buffer.CONTEXT)


def session_list(*, user: Any, q: str = "") -> QuerySet[Session]:
    """The user's sessions, pinned first, then by last activity (index session_owner_list)."""
    qs = Session.objects.filter(owner_id=user.pk).select_related("profile")
    if q:
        qs = qs.filter(title__icontains=q)
    return qs.order_by("-pinned", "-last_active")


def display_messages(*, session: Session) -> QuerySet[Message]:
    """The display history, oldest first (index message_session_seq)."""
    return Message.objects.filter(session=session, buffer__in=DISPLAY).order_by("seq")


def context_messages(*, session_id: Any) -> QuerySet[Message]:
    """What the model sees: the compression summary (if any) first, then the rest in order."""
    return Message.objects.filter(session_id=session_id, buffer__in=CONTEXT).order_by("-is_summary", "seq")


def message_to_dict(m: Message) -> dict[str, Any]:
    return {
        "id": m.pk,
        "seq": m.seq,
        "role": m.role,
        "content": m.content,
        "images": m.images,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id or None,
        "name": m.name or None,
        "thinking": m.thinking,
        "is_plan": m.is_plan,
        "is_summary": m.is_summary,
        "is_recall": m.is_recall,
        "is_compression": m.is_compression,
        "interrupted": m.interrupted,
        "metadata": m.metadata,
        "created_at": m.created_at.isoformat(),
    }
