"""REST: the recall of a session (spec 004, docs/api.md). Mounted at the root (PREFIX)."""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field

from recall_app import selectors, services
from sessions_app.services import session_access

PREFIX = ""
router = Router(tags=["recalls"])


@router.get("/sessions/{session_id}/recall", summary="The session's pending recall, or {\"recall\": null}")
def get_recall(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = session_access(user=request.user, session_id=session_id)
    # A run parked on an approval first: that is what the user must act on.
    recall = selectors.recall_waiting(session=session) or selectors.recall_pending(session=session)
    return selectors.recall_to_dict(recall) if recall else {"recall": None}


class RulesIn(Schema):
    allowed_tools: list[str] | None = Field(default=None, max_length=100)
    max_iterations: int | None = None
    max_seconds: int | None = None
    on_approval: str | None = Field(default=None, max_length=10, description="deny or park")


@router.patch("/sessions/{session_id}/recall", summary="Change what the session's recall may do when it runs")
def patch_recall(request: HttpRequest, session_id: str, payload: RulesIn) -> dict[str, Any]:
    session = session_access(user=request.user, session_id=session_id)
    recall = services.recall_set_rules(session=session, **payload.dict(exclude_unset=True))
    return selectors.recall_to_dict(recall)


@router.delete("/sessions/{session_id}/recall", summary="Cancel the session's pending recall")
def cancel_recall(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = session_access(user=request.user, session_id=session_id)
    services.recall_cancel(session=session)
    return {"ok": True}


@router.post("/sessions/{session_id}/recall/skip", summary="Skip the next occurrence of a recurring recall")
def skip_recall(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = session_access(user=request.user, session_id=session_id)
    services.recall_skip(session=session)
    return {"ok": True}


@router.get("/sessions/{session_id}/recalls", summary="All recalls of the session with their run history")
def list_recalls(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = session_access(user=request.user, session_id=session_id)
    recalls = selectors.recall_list(session=session)
    return {"session_id": str(session.id), "recalls": [selectors.recall_history_dict(r) for r in recalls]}


@router.post("/internal/recalls/{recall_id}/fire", auth=None, include_in_schema=False)
def fire_for_command(request: HttpRequest, recall_id: str) -> dict[str, Any]:
    """``manage.py fire_recall`` of this installation hands the run to the embedded server (whose
    clients then watch it live). Signed with SECRET_KEY (``navi_site.serverfile``)."""
    from navi_site import serverfile
    from navi_site.errors import NaviError
    from recall_app.firing import fire_now

    if not serverfile.verify(recall_id, request.headers.get("X-Navi-Signature", "")):
        raise NaviError("Not a signed request of this installation's manage.py.", status=403)
    return fire_now(recall_id, worker="manage.py fire_recall (in the server)")
