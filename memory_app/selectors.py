"""Reads of a user's memory and of the extraction bookkeeping."""
from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory_app.models import MemoryFact, MemorySummary
from sessions_app.models import Message, Session

# Failed runs after which a session waits for new activity before it is tried again.
MAX_ATTEMPTS = 5
EXTRACTABLE_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)
DISPLAY_BUFFERS = (Message.Buffer.BOTH, Message.Buffer.MESSAGES)


def live_facts(*, user_id: int) -> QuerySet[MemoryFact]:
    """The user's facts that have not expired."""
    return MemoryFact.objects.filter(user_id=user_id).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )


def fact_list(*, user_id: int, category: str | None = None, include_expired: bool = False) -> QuerySet[MemoryFact]:
    """The user's facts, most recently updated first (index memory_fact_user[_cat]_updated)."""
    qs = MemoryFact.objects.filter(user_id=user_id) if include_expired else live_facts(user_id=user_id)
    if category:
        qs = qs.filter(category=category)
    return qs.order_by("-updated_at", "-id")


def facts_fingerprint(facts: list[MemoryFact]) -> str:
    """Identifies a set of facts and their values (what a summary was built from)."""
    digest = hashlib.sha256()
    for fact in sorted(facts, key=lambda f: f.pk):
        digest.update(f"{fact.pk}\x1f{fact.category}\x1f{fact.key}\x1f{fact.value}\x1e".encode())
    return digest.hexdigest()


def summary_text(*, user_id: int) -> str:
    return MemorySummary.objects.filter(user_id=user_id).values_list("text", flat=True).first() or ""


def stale_sessions(*, user_id: int | None = None, limit: int = 200) -> list[uuid.UUID]:
    """Sessions idle for MEMORY_IDLE_MINUTES with messages not yet mined, not claimed right now,
    and not given up on (MAX_ATTEMPTS failures with no activity since)."""
    now = timezone.now()
    cutoff = now - timedelta(minutes=settings.MEMORY_IDLE_MINUTES)
    qs = Session.objects.filter(last_active__lte=cutoff).annotate(
        done=Coalesce(F("memory_state__extracted_up_to_seq"), Value(0))
    ).filter(next_seq__gt=F("done") + 1)
    if user_id is not None:
        qs = qs.filter(owner_id=user_id)
    qs = qs.exclude(memory_state__claimed_until__gt=now).exclude(
        memory_state__attempts__gte=MAX_ATTEMPTS, memory_state__attempted_at__gte=F("last_active")
    )
    return list(qs.order_by("last_active").values_list("id", flat=True)[:limit])


def new_messages(*, session_id: Any, after_seq: int) -> QuerySet[Message]:
    """Conversation rows after ``after_seq``: user/assistant text of the display history, oldest first."""
    return (
        Message.objects.filter(
            session_id=session_id, seq__gt=after_seq, buffer__in=DISPLAY_BUFFERS, role__in=EXTRACTABLE_ROLES,
            is_plan=False, is_summary=False, is_compression=False,
        )
        .exclude(content__isnull=True)
        .exclude(content="")
        .order_by("seq")
    )


def last_seq(*, session_id: Any) -> int:
    """The highest seq the session has handed out (0 for none)."""
    next_seq = Session.objects.filter(pk=session_id).values_list("next_seq", flat=True).first()
    return max(0, (next_seq or 1) - 1)


def stating_message_id(*, session_id: Any) -> int | None:
    """The user message a fact saved during the running turn comes from: the turn's (latest) user message."""
    return (Message.objects.filter(session_id=session_id, role=Message.Role.USER, buffer__in=DISPLAY_BUFFERS)
            .order_by("-seq").values_list("pk", flat=True).first())


def facts_with_provenance(qs: QuerySet[MemoryFact]) -> QuerySet[MemoryFact]:
    """The facts with what their provenance shows (source session's title, source message's seq and text)."""
    return qs.select_related("source_session", "source_message")
