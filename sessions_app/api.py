"""REST: /sessions (spec 002 "REST API")."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Query, Router, Status

from sessions_app import selectors, services
from sessions_app.models import Session
from sessions_app.schemas import (
    OkOut,
    PinIn,
    SessionCreatedOut,
    SessionCreateIn,
    SessionDetailOut,
    SessionOut,
    SessionPage,
    SessionPatchIn,
)

router = Router(tags=["sessions"])


def session_out(session: Session, **extra: Any) -> dict[str, Any]:
    return {
        "id": str(session.id),
        "profile_id": session.profile_id,
        "profile_name": session.profile.name,
        "title": session.title,
        "pinned": session.pinned,
        "created_at": session.created_at,
        "last_active": session.last_active,
        "context_token_count": session.context_token_count,
        **extra,
    }


@router.post("", response={201: SessionCreatedOut}, summary="Create a session")
def create_session(request: HttpRequest, payload: SessionCreateIn) -> Status:
    session = services.session_create(owner=request.user, profile_id=payload.profile_id, title=payload.title)
    from sessions_app.hooks import run_session_created_hooks

    run_session_created_hooks(session)
    return Status(201, {"session_id": str(session.id), "profile_id": session.profile_id, "created_at": session.created_at})


@router.get("", response=SessionPage, summary="List sessions (pinned first, then last active)")
def list_sessions(
    request: HttpRequest,
    limit: int = Query(50, ge=1, le=200),
    offset: int = Query(0, ge=0),
    q: str = Query("", max_length=200, description="Search in titles"),
    has_pending_recall: bool | None = None,
) -> dict[str, Any]:
    from sessions_app.hooks import filter_sessions, session_flags

    qs = filter_sessions(selectors.session_list(user=request.user, q=q), has_pending_recall=has_pending_recall)
    total = qs.count()
    page = list(qs[offset : offset + limit])
    flags = session_flags([s.id for s in page])
    return {
        "items": [session_out(s, **flags.get(s.id, {})) for s in page],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


@router.get("/{session_id}", response=SessionDetailOut, summary="A session with its display history")
def get_session(
    request: HttpRequest,
    session_id: str,
    limit: int = Query(200, ge=1, le=1000, description="How many of the latest messages"),
    before: int | None = Query(None, ge=1, description="Only messages with seq below this (older pages)"),
) -> dict[str, Any]:
    from sessions_app.hooks import session_flags

    session = services.session_access(user=request.user, session_id=session_id)
    qs = selectors.display_messages(session=session)
    if before is not None:
        qs = qs.filter(seq__lt=before)
    rows = list(qs.order_by("-seq")[: limit + 1])
    has_more = len(rows) > limit
    rows = rows[:limit][::-1]
    return session_out(
        session,
        messages=[selectors.message_to_dict(m) for m in rows],
        has_more=has_more,
        max_context_tokens=settings.OLLAMA_NUM_CTX,
        **session_flags([session.id]).get(session.id, {}),
    )


@router.get("/{session_id}/context", summary="The LLM context (may differ from the display history)")
def get_context(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = services.session_access(user=request.user, session_id=session_id)
    rows = selectors.context_messages(session_id=session.id)
    return {
        "session_id": str(session.id),
        "context_token_count": session.context_token_count,
        "max_context_tokens": settings.OLLAMA_NUM_CTX,
        "messages": [selectors.message_to_dict(m) for m in rows],
    }


@router.patch("/{session_id}/pin", response=SessionOut, summary="Pin or unpin")
def pin_session(request: HttpRequest, session_id: str, payload: PinIn) -> dict[str, Any]:
    session = services.session_access(user=request.user, session_id=session_id)
    return session_out(services.session_update(session=session, pinned=payload.pinned))


@router.patch("/{session_id}", response=SessionOut, summary="Rename or pin")
def patch_session(request: HttpRequest, session_id: str, payload: SessionPatchIn) -> dict[str, Any]:
    session = services.session_access(user=request.user, session_id=session_id)
    return session_out(services.session_update(session=session, title=payload.title, pinned=payload.pinned))


@router.delete("/{session_id}", response=OkOut, summary="Delete a session and its uploaded files")
def delete_session(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = services.session_access(user=request.user, session_id=session_id)
    services.session_delete(session=session)
    return {"ok": True}
