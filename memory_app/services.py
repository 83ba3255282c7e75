"""Writes to a user's memory. Facts change only through these functions.

Each write marks the user's summary stale; callers that want the summary rebuilt
soon call ``summary_rebuild_later`` (Celery, on commit).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory_app import enqueue
from memory_app.models import MemoryFact, MemoryFactChange, MemorySummary
from memory_app.normalize import MAX_KEY, MAX_VALUE, normalize_category, normalize_key
from navi_site.errors import BadRequest, Conflict, NotFound

log = structlog.get_logger(__name__)

Reason = MemoryFactChange.Reason

# Facts about someone else ("people": a friend's birthday) are never merged with the user's own by key.
OWN_CATEGORY = frozenset({"people"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UpsertResult:
    fact: MemoryFact
    created: bool
    changed: bool  # the value was replaced (a MemoryFactChange row exists)


def clean_fact_fields(*, category: str, key: str, value: str) -> tuple[str, str, str]:
    """Normalised (category, key, value). Raises BadRequest for an empty/too long key or value."""
    norm_key = normalize_key(key)
    value = (value or "").strip()
    if not norm_key:
        raise BadRequest("The key is empty: use a short name like 'favourite_editor'.")
    if len(norm_key) > MAX_KEY:
        raise BadRequest(f"The key is too long: use at most {MAX_KEY} characters.")
    if not value:
        raise BadRequest("The value is empty.")
    if len(value) > MAX_VALUE:
        raise BadRequest(f"The value is too long: use at most {MAX_VALUE} characters.")
    return normalize_category(category), norm_key, value


def _mark_summary_stale(user_id: int) -> None:
    updated = MemorySummary.objects.filter(user_id=user_id).update(stale=True)
    if not updated:
        MemorySummary.objects.get_or_create(user_id=user_id, defaults={"stale": True})


def fact_upsert(
    *,
    user_id: int,
    category: str,
    key: str,
    value: str,
    confidence: float = 1.0,
    session_id: uuid.UUID | str | None = None,
    message_id: int | None = None,
    reason: str = Reason.CONTRADICTED,
    one_per_key: bool = False,
) -> UpsertResult:
    """Create or update the fact (user, category, key); a changed value is recorded in its history.

    ``one_per_key``: a model states the fact, not the category. When the user has no fact
    (category, key) but exactly one with that key under another category, that fact is updated and
    moved to ``category``: the same statement filed under "personal" one day and "preferences" the
    next (Qwen 1.5B) left the older value beside the newer, and the model answered with the older.
    Facts about other people (``OWN_CATEGORY``) are never merged so.

    Raises BadRequest for an unusable key or value.
    """
    category, key, value = clean_fact_fields(category=category, key=key, value=value)
    confidence = min(1.0, max(0.0, float(confidence)))
    now = timezone.now()
    with transaction.atomic():
        fact = MemoryFact.objects.select_for_update().filter(user_id=user_id, category=category, key=key).first()
        moving = False
        if fact is None and one_per_key and category not in OWN_CATEGORY:
            elsewhere = list(MemoryFact.objects.select_for_update().filter(user_id=user_id, key=key)
                             .exclude(category__in=OWN_CATEGORY)[:2])
            moving = len(elsewhere) == 1
            if moving:
                fact = elsewhere[0]
                fact.category = category
        if fact is None:
            try:
                with transaction.atomic():
                    fact = MemoryFact.objects.create(
                        user_id=user_id, category=category, key=key, value=value, confidence=confidence,
                        source_session_id=session_id, source_message_id=message_id, created_at=now, updated_at=now,
                    )
            except IntegrityError:  # a concurrent writer created it: update theirs
                return fact_upsert(user_id=user_id, category=category, key=key, value=value, confidence=confidence,
                                   session_id=session_id, message_id=message_id, reason=reason,
                                   one_per_key=one_per_key)
            _mark_summary_stale(user_id)
            return UpsertResult(fact=fact, created=True, changed=False)
        changed = fact.value != value
        if changed:
            MemoryFactChange.objects.create(fact=fact, old_value=fact.value, new_value=value,
                                            session_id=session_id, reason=reason, created_at=now)
            fact.value = value
            fact.confidence = confidence
            fact.source_session_id = session_id
            fact.source_message_id = message_id
        else:
            fact.confidence = max(fact.confidence, confidence)
        if fact.is_expired:  # stated again: it holds again
            fact.expires_at = None
        fact.updated_at = now
        try:
            with transaction.atomic():
                fact.save()
        except IntegrityError:
            if not moving:
                raise
            # Moved into (category, key) that a concurrent writer has just created: update theirs instead.
            transaction.set_rollback(True)
        else:
            moving = False
            _mark_summary_stale(user_id)
    if moving:
        return fact_upsert(user_id=user_id, category=category, key=key, value=value, confidence=confidence,
                           session_id=session_id, message_id=message_id, reason=reason)
    return UpsertResult(fact=fact, created=False, changed=changed)


def fact_delete(*, fact: MemoryFact) -> None:
    """Forget a fact and its history."""
    user_id = fact.user_id
    with transaction.atomic():
        fact.delete()
        _mark_summary_stale(user_id)
    log.info("memory_fact_forgotten", user_id=user_id, category=fact.category, key=fact.key)


def fact_forget(*, user_id: int, category: str, key: str) -> MemoryFact | None:
    """Delete the user's fact (category, key) if it exists; returns the deleted fact or None."""
    fact = MemoryFact.objects.filter(
        user_id=user_id, category=normalize_category(category), key=normalize_key(key)
    ).first()
    if fact is None:
        return None
    fact_delete(fact=fact)
    return fact


_UNSET: Any = object()


def fact_update(
    *,
    fact: MemoryFact,
    value: str | None = None,
    category: str | None = None,
    key: str | None = None,
    expires_at: datetime | None = _UNSET,
    session_id: uuid.UUID | str | None = None,
) -> MemoryFact:
    """Edit a fact by hand (REST, admin); records a "user edit" change.

    Raises BadRequest for an unusable field and Conflict when (category, key) is taken.
    """
    new_cat, new_key, new_value = clean_fact_fields(
        category=fact.category if category is None else category,
        key=fact.key if key is None else key,
        value=fact.value if value is None else value,
    )
    new_expiry = fact.expires_at if expires_at is _UNSET else expires_at
    if (new_cat, new_key, new_value, new_expiry) == (fact.category, fact.key, fact.value, fact.expires_at):
        return fact
    clash = MemoryFact.objects.filter(user_id=fact.user_id, category=new_cat, key=new_key).exclude(pk=fact.pk)
    if clash.exists():
        raise Conflict(f"A fact {new_cat}/{new_key} already exists: edit or delete that one instead.")
    now = timezone.now()
    with transaction.atomic():
        MemoryFactChange.objects.create(fact=fact, old_value=fact.value, new_value=new_value,
                                        session_id=session_id, reason=Reason.USER_EDIT, created_at=now)
        fact.category, fact.key, fact.value, fact.expires_at = new_cat, new_key, new_value, new_expiry
        fact.updated_at = now
        fact.save()
        _mark_summary_stale(fact.user_id)
    return fact


def fact_access(*, user_id: int, fact_id: int | str) -> MemoryFact:
    """The user's fact. Raises NotFound alike for a malformed id, an unknown id or another user's fact."""
    try:
        pk = int(fact_id)
    except (TypeError, ValueError):
        raise NotFound(f"Memory fact {fact_id!s:.40} not found.") from None
    fact = MemoryFact.objects.filter(pk=pk, user_id=user_id).first()
    if fact is None:
        raise NotFound(f"Memory fact {pk} not found.")
    return fact


def summary_set(*, user_id: int, text: str, facts_version: str, still_stale: bool = False,
                facts_as_of: datetime | None = None) -> MemorySummary:
    """Store a rebuilt summary; ``still_stale`` when the facts changed while it was being written.

    ``updated_at`` becomes ``facts_as_of`` (when the facts it was built from were read; default now):
    the memory provider lists the facts updated after it next to the summary."""
    summary, _ = MemorySummary.objects.get_or_create(user_id=user_id)
    summary.text = text
    summary.facts_version = facts_version
    summary.updated_at = facts_as_of or timezone.now()
    summary.stale = still_stale
    summary.save()
    return summary


def summary_rebuild_later(*, user_id: int) -> None:
    """Enqueue ``memory.rebuild_summary`` once the current transaction commits."""
    enqueue.rebuild_summary_later(user_id)
