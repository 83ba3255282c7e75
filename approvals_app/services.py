"""Writes: opening and deciding approvals, session grants, the audit log and its retention.

State changes of an approval: ``pending`` → approved | denied (a person, ``approval_decide``),
expired (the clock: the waiting run, or ``approvals_expire_stale``), cancelled (Stop, the run
ended). Each is one conditional UPDATE from ``pending``: exactly one of two racing decisions
counts, and nothing runs twice. After commit each change wakes a run waiting in this process
(``waiters``) and sends ``signals.approval_created`` / ``approval_resolved``; every decision and
every run of an ask-class call is in the audit log (``AuditEntry``).
"""
from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import structlog
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals_app import signals, waiters
from approvals_app.models import Approval, AuditEntry, SessionGrant
from approvals_app.selectors import approval_access
from navi_site.errors import BadRequest, Conflict

log = structlog.get_logger(__name__)

MAX_REASON_CHARS = 2000
MAX_ARGS_CHARS = 20_000
EXCERPT_CHARS = 1000
_DECISIONS = {"approve": Approval.Status.APPROVED, "approved": Approval.Status.APPROVED,
              "deny": Approval.Status.DENIED, "denied": Approval.Status.DENIED}
_RESOLVED_KIND = {
    (Approval.Status.APPROVED, Approval.Scope.ONCE): AuditEntry.Kind.APPROVED,
    (Approval.Status.APPROVED, Approval.Scope.SESSION): AuditEntry.Kind.APPROVED_SESSION,
}


def digest_of(args: Any) -> str:
    """sha256 of the canonical JSON of a call's arguments (what a session grant matches)."""
    text = json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def stored_args(args: Any) -> Any:
    """Arguments as stored in approvals and the audit log: huge ones are cut (with a note)."""
    text = json.dumps(args, ensure_ascii=False, default=str)
    if len(text) <= MAX_ARGS_CHARS:
        return json.loads(text)
    return {"_truncated": text[:MAX_ARGS_CHARS], "_note": f"{len(text) - MAX_ARGS_CHARS} more characters not kept"}


def _clean_text(value: Any, limit: int) -> str:
    return str(value or "").replace("\x00", "").strip()[:limit]


def _after_commit(fn: Any, *args: Any, **kwargs: Any) -> None:
    transaction.on_commit(partial(fn, *args, **kwargs), robust=True)


def _send(signal: Any, approval_id: uuid.UUID) -> None:
    approval = Approval.objects.select_related("user", "session", "decided_by").filter(pk=approval_id).first()
    if approval is not None:
        signal.send_robust(sender=Approval, approval=approval)


def _announce(signal: Any, approval: Approval) -> None:
    _after_commit(waiters.wake, str(approval.pk))
    _after_commit(_send, signal, approval.pk)


# -- approvals -------------------------------------------------------------------------------


def approval_open(*, session_id: str, user_id: int, run_id: str, tool: str, args: dict[str, Any], reason: str,
                  touches: str, tainted_by: tuple[str, ...] | list[str], origin: str, is_subagent: bool,
                  wait_seconds: float) -> Approval:
    """A call waits for the session owner's decision until ``wait_seconds`` from now."""
    now = timezone.now()
    with transaction.atomic():
        approval = Approval.objects.create(
            session_id=session_id, user_id=user_id, run_id=run_id[:40], tool=tool[:200], arguments=stored_args(args),
            reason=reason, touches=touches, tainted_by=list(tainted_by), origin=origin, is_subagent=is_subagent,
            created_at=now, expires_at=now + timedelta(seconds=wait_seconds),
        )
        _announce(signals.approval_created, approval)
    log.info("approval_opened", approval_id=str(approval.pk), session_id=session_id, tool=tool, origin=origin,
             tainted=bool(tainted_by))
    return approval


def approval_decide(*, user: Any, approval_id: Any, decision: str, reason: str | None = None,
                    scope: str = "once", session_id: Any = None) -> Approval:
    """The owner's decision on a pending approval ("approve" or "deny"; scope "once" or "session").

    Raises NotFound (unknown id, or another user's), BadRequest (a decision or scope that does not
    exist) and Conflict (already decided, expired or cancelled: nothing changes, nothing runs twice).
    """
    status = _DECISIONS.get(str(decision or "").strip().lower())
    if status is None:
        raise BadRequest(f"decision={str(decision)[:40]!r} is not valid: send \"approve\" or \"deny\".")
    scope = str(scope or "once").strip().lower()
    if scope not in Approval.Scope.values:
        raise BadRequest(f"scope={scope[:40]!r} is not valid: send \"once\" or \"session\".")
    if status == Approval.Status.DENIED:
        scope = Approval.Scope.ONCE
    note = _clean_text(reason, MAX_REASON_CHARS)
    approval = approval_access(user=user, approval_id=approval_id, session_id=session_id)
    now = timezone.now()
    with transaction.atomic():
        won = Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING, expires_at__gt=now).update(
            status=status, scope=scope, decided_by=user, decided_at=now, decision_reason=note)
        if won:
            approval.refresh_from_db()
            if status == Approval.Status.APPROVED and scope == Approval.Scope.SESSION:
                SessionGrant.objects.get_or_create(
                    session_id=approval.session_id, tool=approval.tool, digest=digest_of(approval.arguments),
                    defaults={"arguments": approval.arguments, "approval": approval, "created_by": user})
            _audit_resolution(approval)
            _announce(signals.approval_resolved, approval)
    if not won:
        approval.refresh_from_db()
        if approval.status == Approval.Status.PENDING:  # past its time, the waiting run has not noticed yet
            approval_close(approval_id=approval.pk, status=Approval.Status.EXPIRED, now=now)
            approval.refresh_from_db()
        raise Conflict(_not_pending(approval))
    log.info("approval_decided", approval_id=str(approval.pk), status=status, scope=scope, user_id=user.pk)
    return approval


def _not_pending(approval: Approval) -> str:
    when = approval.decided_at.isoformat() if approval.decided_at else ""
    if approval.status == Approval.Status.EXPIRED:
        return (f"This approval expired at {approval.expires_at.isoformat()}: it counted as denied and "
                f"{approval.tool} was not run. Ask Navi again if you still want it.")
    if approval.status == Approval.Status.CANCELLED:
        return f"This approval was cancelled ({approval.decision_reason or 'the turn ended'}); {approval.tool} was not run."
    who = f" by {approval.decided_by.get_username()}" if approval.decided_by else ""
    return f"This approval was already {approval.status}{who} at {when}; the first decision counts."


def approval_close(*, approval_id: Any, status: str, reason: str = "", now: datetime | None = None) -> bool:
    """End a pending approval without a person's decision: ``expired`` or ``cancelled``. True when
    this call changed it (False: it was decided meanwhile)."""
    now = now or timezone.now()
    if status not in (Approval.Status.EXPIRED, Approval.Status.CANCELLED):
        raise ValueError(f"approval_close cannot set {status!r}")
    with transaction.atomic():
        won = Approval.objects.filter(pk=approval_id, status=Approval.Status.PENDING).update(
            status=status, decided_at=now, decision_reason=reason[:MAX_REASON_CHARS])
        if not won:
            return False
        approval = Approval.objects.get(pk=approval_id)
        _audit_resolution(approval)
        _announce(signals.approval_resolved, approval)
    log.info("approval_closed", approval_id=str(approval_id), status=status)
    return True


def approvals_cancel_orphans(*, session_id: Any, run_id: str) -> int:
    """Cancel approvals a run left pending when it ended without settling them (its task was
    cancelled or crashed mid-wait); returns how many. Only that run's: a new turn may already wait."""
    if not run_id:
        return 0
    ids = list(Approval.objects.filter(session_id=session_id, run_id=run_id[:40], status=Approval.Status.PENDING)
               .values_list("pk", flat=True))
    return sum(approval_close(approval_id=pk, status=Approval.Status.CANCELLED, reason="the turn ended") for pk in ids)


def approvals_expire_stale(*, now: datetime | None = None) -> int:
    """Expire pending approvals past their time whose run is gone (a crashed process); returns how many."""
    now = now or timezone.now()
    ids = list(Approval.objects.filter(status=Approval.Status.PENDING, expires_at__lte=now).values_list("pk", flat=True))
    return sum(approval_close(approval_id=pk, status=Approval.Status.EXPIRED, now=now) for pk in ids)


# -- the audit log ---------------------------------------------------------------------------


def _audit_resolution(approval: Approval) -> None:
    kind = _RESOLVED_KIND.get((approval.status, approval.scope)) or approval.status
    AuditEntry.objects.create(
        user_id=approval.user_id, session_id=approval.session_id, run_id=approval.run_id, tool=approval.tool,
        arguments=approval.arguments, decision=kind, decided_by_id=approval.decided_by_id,
        decided_at=approval.decided_at, reason=approval.decision_reason or approval.reason,
        tainted_by=approval.tainted_by, origin=approval.origin, approval_id=approval.pk,
    )


def audit_record(*, user_id: int | None, session_id: str | None, run_id: str, tool: str, args: dict[str, Any],
                 decision: str, reason: str = "", tainted_by: tuple[str, ...] = (), origin: str = "live",
                 ran: bool = False, success: bool | None = None, result: str = "") -> AuditEntry:
    """One audit row for a call decided without a person (a rule, a grant, an unattended run)."""
    return AuditEntry.objects.create(
        user_id=user_id, session_id=_session_uuid(session_id), run_id=run_id[:40], tool=tool[:200],
        arguments=stored_args(args), decision=decision, decided_at=timezone.now(), reason=reason,
        tainted_by=list(tainted_by), origin=origin, ran=ran, success=success, result_excerpt=excerpt(result),
    )


def audit_attach_result(*, approval_id: Any, success: bool, result: str) -> int:
    """The result of an approved call, on its decision's audit row."""
    return AuditEntry.objects.filter(approval_id=approval_id).update(ran=True, success=success,
                                                                     result_excerpt=excerpt(result))


def excerpt(text: str) -> str:
    text = str(text or "").replace("\x00", "")
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + f"… [{len(text) - EXCERPT_CHARS} more]"


def _session_uuid(session_id: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(session_id)) if session_id else None
    except ValueError:
        return None


def audit_purge(*, now: datetime | None = None, days: int | None = None) -> dict[str, int]:
    """Delete audit entries and finished approvals older than AUDIT_RETENTION_DAYS; expire stale ones."""
    now = now or timezone.now()
    keep = int(days if days is not None else getattr(settings, "AUDIT_RETENTION_DAYS", 90))
    cutoff = now - timedelta(days=keep)
    expired = approvals_expire_stale(now=now)
    entries, _ = AuditEntry.objects.filter(created_at__lt=cutoff).delete()
    approvals, _ = Approval.objects.filter(created_at__lt=cutoff).exclude(status=Approval.Status.PENDING).delete()
    log.info("audit_purged", entries=entries, approvals=approvals, expired=expired, days=keep)
    return {"audit_entries": entries, "approvals": approvals, "expired": expired}
