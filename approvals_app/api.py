"""REST: deciding approvals, the session's approvals, and the audit log. Mounted at the root."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field, field_validator

from approvals_app import selectors, services

PREFIX = ""
router = Router(tags=["approvals"])


class DecisionIn(Schema):
    decision: Literal["approve", "deny"] = Field(description="approve or deny")
    scope: Literal["once", "session"] = Field(
        default="once", description="once, or session: this exact call runs without asking again in this session")
    reason: str | None = Field(default=None, max_length=services.MAX_REASON_CHARS,
                               description="Optional; the model sees it (on a denial)")

    @field_validator("reason", mode="before")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        return value.replace("\x00", "") if isinstance(value, str) else value


@router.post("/sessions/{session_id}/approvals/{approval_id}",
             summary="Approve or deny a tool call that waits for you (the first decision counts)")
def decide(request: HttpRequest, session_id: str, approval_id: str, payload: DecisionIn) -> dict[str, Any]:
    approval = services.approval_decide(user=request.user, approval_id=approval_id, session_id=session_id,
                                        decision=payload.decision, scope=payload.scope, reason=payload.reason)
    return selectors.approval_to_dict(approval)


@router.get("/sessions/{session_id}/approvals", summary="The session's approvals, newest first")
def list_approvals(request: HttpRequest, session_id: str,
                   status: str | None = Query(None, max_length=20, description="pending, approved, denied, …"),
                   limit: int = Query(50, ge=1, le=200)) -> dict[str, Any]:
    from sessions_app.services import session_access

    session = session_access(user=request.user, session_id=session_id)
    rows = selectors.approvals_of_session(session_id=session.id, status=status)[:limit]
    return {"session_id": str(session.id), "items": [selectors.approval_to_dict(a) for a in rows]}


@router.get("/audit", summary="The audit log: approval decisions and runs of ask-class tools (staff see all)")
def audit(request: HttpRequest,
          tool: str = Query("", max_length=200), decision: str = Query("", max_length=20),
          session_id: str = Query("", max_length=40), user: str = Query("", max_length=150,
                                                                        description="username (staff only)"),
          since: datetime | None = None, until: datetime | None = None,
          limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=1_000_000_000)) -> dict[str, Any]:
    qs = selectors.audit_list(user=request.user, tool=tool, decision=decision, session_id=session_id,
                              username=user, since=since, until=until)
    total = qs.count()
    return {"items": [selectors.audit_to_dict(e) for e in qs[offset: offset + limit]], "total": total,
            "limit": limit, "offset": offset}
