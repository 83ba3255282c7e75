"""Reads: the admin's rules (cached briefly: the policy point asks on every tool call), grants,
approvals and the audit log, and their wire forms."""
from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime
from typing import Any

import structlog
from asgiref.sync import sync_to_async
from django.db import DatabaseError
from django.db.models import QuerySet

from approvals_app.models import Approval, AuditEntry, SessionGrant, ToolRule
from approvals_app.policy import RuleView
from navi_site.errors import BadRequest, NotFound

log = structlog.get_logger(__name__)

CACHE_SECONDS = 5.0

_lock = threading.Lock()
_rules: list[RuleView] = []
_loaded_at: float | None = None


def _fresh() -> bool:
    return _loaded_at is not None and time.monotonic() - _loaded_at < CACHE_SECONDS


def _load() -> list[RuleView]:
    try:
        rows = list(ToolRule.objects.values_list("profile_id", "tool", "action", "decision", "allow_patterns"))
    # Not migrated yet or the database is away: the built-in defaults apply (they ask for every
    # dangerous tool, so failing to read the rules never opens anything up).
    except (DatabaseError, RuntimeError) as exc:
        log.debug("tool_rules_unavailable", error=str(exc))
        return []
    return [RuleView(profile_id=p, tool=t, action=a, decision=d,
                     allow_patterns=tuple(x for x in (pat or []) if isinstance(x, str)))
            for p, t, a, d, pat in rows]


def _refresh() -> list[RuleView]:
    global _rules, _loaded_at
    with _lock:
        _rules = _load()
        _loaded_at = time.monotonic()
    return _rules


def rules() -> list[RuleView]:
    """Every ToolRule (blocking; refreshed every CACHE_SECONDS)."""
    return _rules if _fresh() else _refresh()


async def arules() -> list[RuleView]:
    """Every ToolRule: from the cache without touching the database while it is fresh."""
    if _fresh():
        return _rules
    return await sync_to_async(_refresh, thread_sensitive=True)()


def invalidate_rules() -> None:
    global _loaded_at
    _loaded_at = None


def grant_exists(*, session_id: str, tool: str, digest: str) -> bool:
    return SessionGrant.objects.filter(session_id=session_id, tool=tool, digest=digest).exists()


def _uuid(value: Any, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise NotFound(f"No {what} with id {str(value)[:60]!r}: check the id.") from None


def approval_access(*, user: Any, approval_id: Any, session_id: Any = None) -> Approval:
    """The approval, if ``user`` owns it (in ``session_id`` when given). Raises NotFound: another
    user's approval is indistinguishable from a missing one."""
    qs = Approval.objects.select_related("decided_by").filter(pk=_uuid(approval_id, "approval"), user=user)
    if session_id is not None:
        qs = qs.filter(session_id=_uuid(session_id, "session"))
    approval = qs.first() if getattr(user, "is_authenticated", False) else None
    if approval is None:
        raise NotFound(f"No approval with id {approval_id} in your conversations: it may belong to another "
                       "conversation or have been deleted with it.")
    return approval


def approvals_of_session(*, session_id: Any, status: str | None = None) -> QuerySet[Approval]:
    qs = Approval.objects.select_related("decided_by").filter(session_id=session_id)
    if status:
        if status not in Approval.Status.values:
            raise BadRequest(f"status={status!r} is not one of: {', '.join(Approval.Status.values)}.")
        qs = qs.filter(status=status)
    return qs.order_by("-created_at")


def waiting_approval_of_session(session_id: Any) -> Approval | None:
    """The session's pending approval, if a call waits for one (the newest)."""
    return approvals_of_session(session_id=session_id, status=Approval.Status.PENDING).first()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def approval_to_dict(approval: Approval) -> dict[str, Any]:
    return {
        "id": str(approval.id),
        "session_id": str(approval.session_id),
        "tool": approval.tool,
        "arguments": approval.arguments,
        "reason": approval.reason,
        "touches": approval.touches,
        "tainted_by": list(approval.tainted_by or []),
        "origin": approval.origin,
        "is_subagent": approval.is_subagent,
        "status": approval.status,
        "scope": approval.scope,
        "decided_by": approval.decided_by.get_username() if approval.decided_by else None,
        "decision_reason": approval.decision_reason,
        "created_at": _iso(approval.created_at),
        "expires_at": _iso(approval.expires_at),
        "decided_at": _iso(approval.decided_at),
    }


def audit_list(*, user: Any, tool: str = "", decision: str = "", session_id: str = "", username: str = "",
               since: datetime | None = None, until: datetime | None = None) -> QuerySet[AuditEntry]:
    """Audit entries visible to ``user`` (own ones; staff: everyone's), newest first, filtered."""
    qs = AuditEntry.objects.select_related("user", "decided_by")
    if not getattr(user, "is_staff", False):
        qs = qs.filter(user=user)
    elif username:
        qs = qs.filter(user__username=username)
    if tool:
        qs = qs.filter(tool=tool)
    if decision:
        if decision not in AuditEntry.Kind.values:
            raise BadRequest(f"decision={decision!r} is not one of: {', '.join(AuditEntry.Kind.values)}.")
        qs = qs.filter(decision=decision)
    if session_id:
        qs = qs.filter(session_id=_uuid(session_id, "session"))
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if until is not None:
        qs = qs.filter(created_at__lt=until)
    return qs.order_by("-created_at", "-id")


def audit_to_dict(entry: AuditEntry) -> dict[str, Any]:
    return {
        "id": entry.pk,
        "created_at": _iso(entry.created_at),
        "user": entry.user.get_username() if entry.user else None,
        "session_id": str(entry.session_id) if entry.session_id else None,
        "run_id": entry.run_id,
        "tool": entry.tool,
        "arguments": entry.arguments,
        "decision": entry.decision,
        "decided_by": entry.decided_by.get_username() if entry.decided_by else None,
        "decided_at": _iso(entry.decided_at),
        "reason": entry.reason,
        "tainted_by": list(entry.tainted_by or []),
        "origin": entry.origin,
        "approval_id": str(entry.approval_id) if entry.approval_id else None,
        "ran": entry.ran,
        "success": entry.success,
        "result_excerpt": entry.result_excerpt,
    }
