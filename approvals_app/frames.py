"""The WebSocket frame that decides an approval (registered with ``sessions_app.hooks.on_frame``)::

    {"type": "approval", "approval_id": "…", "decision": "approve" | "deny",
     "scope": "once" | "session", "reason": "optional, the model sees it", "ref": "optional echo"}

Bad frames and refused decisions (unknown, expired, already decided, another user's) answer the
sending client with an ``error`` event carrying ``"frame": "approval"`` and the frame's ``ref``;
the connection stays. A decision that counts is announced to every tab by the running turn's
``approval_resolved`` event.
"""
from __future__ import annotations

from typing import Any, Literal

from channels.db import database_sync_to_async
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from approvals_app import services
from navi_site.errors import BadRequest


class ApprovalFrame(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["approval"]
    approval_id: str = Field(min_length=1, max_length=64)
    decision: Literal["approve", "deny"]
    scope: Literal["once", "session"] = "once"
    reason: str | None = Field(default=None, max_length=services.MAX_REASON_CHARS)


def parse(payload: dict[str, Any]) -> ApprovalFrame:
    try:
        return ApprovalFrame.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())) or 'frame'}: {e.get('msg', 'invalid')}"
                             for e in exc.errors()[:5])
        raise BadRequest(f"Invalid approval frame: {problems}. Send {{\"type\": \"approval\", \"approval_id\": "
                         "\"…\", \"decision\": \"approve\" or \"deny\"}.") from None


async def handle(payload: dict[str, Any], *, user: Any, session_id: str) -> None:
    frame = parse(payload)
    await database_sync_to_async(services.approval_decide)(
        user=user, approval_id=frame.approval_id, session_id=session_id, decision=frame.decision,
        scope=frame.scope, reason=frame.reason)
