"""REST: /memory (facts and the narrative summary of the signed-in user)."""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router

from memory_app import selectors, services
from memory_app.models import MemoryFact, MemorySummary
from memory_app.normalize import normalize_category
from memory_app.schemas import FactOut, FactPage, FactPatchIn, OkOut, SummaryOut
from memory_app.search import ranked_fact_ids

PREFIX = "/memory"
router = Router(tags=["memory"])


EXCERPT = 240


def provenance(fact: MemoryFact) -> dict[str, Any] | None:
    """Where the fact was stated: the session and the message (its seq links into the chat), or None
    when nothing is known or the conversation was deleted."""
    session = fact.source_session
    if session is None or session.owner_id != fact.user_id:
        return None
    message = fact.source_message
    if message is not None and message.session_id != session.pk:
        message = None
    text = " ".join((message.content or "").split()) if message is not None else ""
    return {
        "session_id": str(session.pk),
        "session_title": session.title,
        "message_seq": message.seq if message is not None else None,
        "message_role": message.role if message is not None else None,
        "excerpt": text[:EXCERPT] + ("…" if len(text) > EXCERPT else ""),
        "stated_at": message.created_at if message is not None else None,
    }


def fact_out(fact: MemoryFact) -> dict[str, Any]:
    return {
        "id": fact.pk,
        "category": fact.category,
        "key": fact.key,
        "value": fact.value,
        "confidence": fact.confidence,
        "source_session_id": str(fact.source_session_id) if fact.source_session_id else None,
        "source": provenance(fact),
        "created_at": fact.created_at,
        "updated_at": fact.updated_at,
        "expires_at": fact.expires_at,
    }


def _search_page(user_id: int, q: str, category: str | None, limit: int, offset: int) -> tuple[list[MemoryFact], int]:
    ids = ranked_fact_ids(user_id=user_id, query=q, category=category)
    page = ids[offset : offset + limit]
    by_id = selectors.facts_with_provenance(MemoryFact.objects.filter(user_id=user_id)).in_bulk(page)
    return [by_id[i] for i in page if i in by_id], len(ids)


@router.get("/facts", response=FactPage, summary="List or search remembered facts")
def list_facts(
    request: HttpRequest,
    limit: int = Query(50, ge=1, le=200),
    offset: int = Query(0, ge=0),
    q: str = Query("", max_length=500, description="Keyword search (ranked); empty: newest first"),
    category: str | None = Query(None, max_length=40),
    include_expired: bool = False,
) -> dict[str, Any]:
    cat = normalize_category(category) if category else None
    if q.strip():
        items, total = _search_page(request.user.pk, q, cat, limit, offset)
    else:
        qs = selectors.fact_list(user_id=request.user.pk, category=cat, include_expired=include_expired)
        total = qs.count()
        items = list(selectors.facts_with_provenance(qs)[offset : offset + limit])
    return {"items": [fact_out(f) for f in items], "total": total, "limit": limit, "offset": offset}


@router.get("/facts/{fact_id}", response=FactOut, summary="One fact")
def get_fact(request: HttpRequest, fact_id: str) -> dict[str, Any]:
    return fact_out(services.fact_access(user_id=request.user.pk, fact_id=fact_id))


@router.patch("/facts/{fact_id}", response=FactOut, summary="Edit a fact (recorded in its history)")
def patch_fact(request: HttpRequest, fact_id: str, payload: FactPatchIn) -> dict[str, Any]:
    fact = services.fact_access(user_id=request.user.pk, fact_id=fact_id)
    changes: dict[str, Any] = {k: getattr(payload, k) for k in ("value", "category", "key")}
    if "expires_at" in payload.model_fields_set:
        changes["expires_at"] = payload.expires_at
    fact = services.fact_update(fact=fact, **changes)
    services.summary_rebuild_later(user_id=request.user.pk)
    return fact_out(fact)


@router.delete("/facts/{fact_id}", response=OkOut, summary="Forget a fact")
def delete_fact(request: HttpRequest, fact_id: str) -> dict[str, Any]:
    fact = services.fact_access(user_id=request.user.pk, fact_id=fact_id)
    services.fact_delete(fact=fact)
    services.summary_rebuild_later(user_id=request.user.pk)
    return {"ok": True}


@router.get("/summary", response=SummaryOut, summary="The narrative summary injected into conversations")
def get_summary(request: HttpRequest) -> dict[str, Any]:
    summary = MemorySummary.objects.filter(user_id=request.user.pk).first()
    return {
        "summary": summary.text if summary else "",
        "updated_at": summary.updated_at if summary else None,
        "fact_count": selectors.live_facts(user_id=request.user.pk).count(),
    }
