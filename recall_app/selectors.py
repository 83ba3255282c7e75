"""Reads of recalls: the live recall of a session, its history, the wire forms."""
from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q, QuerySet

from recall_app.models import Recall, RecallRun
from sessions_app.models import Session

# A firing recurring recall is still "the pending recall" of its session (see models.py).
LIVE = Q(status=Recall.Status.PENDING) | Q(status=Recall.Status.FIRING, call_type=Recall.CallType.RECURRING)


def recall_pending(*, session: Session) -> Recall | None:
    """The session's pending recall (a firing recurring one counts), or None."""
    rows = list(Recall.objects.filter(LIVE, session=session).order_by("trigger_at")[:2])
    # Prefer a truly pending row (during a firing recurring run there is no other; see the constraint).
    return next((r for r in rows if r.status == Recall.Status.PENDING), rows[0] if rows else None)


def recall_waiting(*, session: Session) -> Recall | None:
    """The session's firing recall whose run is parked on an approval, or None."""
    run = (RecallRun.objects.select_related("recall")
           .filter(recall__session=session, recall__status=Recall.Status.FIRING, finished_at__isnull=True,
                   outcome=RecallRun.Outcome.WAITING_APPROVAL).order_by("-started_at").first())
    return run.recall if run is not None else None


def _waiting_approval(recall: Recall) -> dict[str, Any] | None:
    """What a parked run of this recall waits for: the approval's id, tool, reason and expiry."""
    if recall.status != Recall.Status.FIRING:
        return None
    from approvals_app.models import Approval

    run = recall.runs.filter(finished_at__isnull=True, outcome=RecallRun.Outcome.WAITING_APPROVAL).first()
    approval = (Approval.objects.filter(pk=run.approval_id, status=Approval.Status.PENDING).first()
                if run is not None and run.approval_id is not None else None)
    if approval is None:
        return None
    return {"approval_id": str(approval.pk), "tool": approval.tool, "reason": approval.reason,
            "touches": approval.touches, "expires_at": approval.expires_at.isoformat()}


def recall_list(*, session: Session, limit: int = 100) -> list[Recall]:
    """All recalls of the session, newest first, with their runs."""
    return list(Recall.objects.filter(session=session).prefetch_related("runs").order_by("-created_at")[:limit])


def sessions_with_pending_recall(ids: list[uuid.UUID]) -> set[uuid.UUID]:
    return set(Recall.objects.filter(LIVE, session_id__in=ids).values_list("session_id", flat=True))


def filter_has_pending_recall(qs: QuerySet[Session], value: Any) -> QuerySet[Session]:
    live = Recall.objects.filter(LIVE).values("session_id")
    wanted = value if isinstance(value, bool) else str(value).lower() in {"1", "true", "yes"}
    return qs.filter(id__in=live) if wanted else qs.exclude(id__in=live)


def recall_to_dict(recall: Recall) -> dict[str, Any]:
    """The documented wire form (GET /sessions/{id}/recall), plus ``firing``."""
    return {
        "id": str(recall.id),
        "call_type": recall.call_type,
        "trigger_at": recall.trigger_at.isoformat(),
        "interval_seconds": recall.interval_seconds,
        "internal_comment": recall.internal_comment,
        "additional_context_message": recall.additional_context_message,
        "status": recall.public_status,
        "firing": recall.status == Recall.Status.FIRING,
        "allowed_tools": list(recall.allowed_tools or []),
        "max_iterations": recall.max_iterations,
        "max_seconds": recall.max_seconds,
        "on_approval": recall.on_approval,
        "waiting_approval": _waiting_approval(recall),
    }


def run_to_dict(run: RecallRun) -> dict[str, Any]:
    return {
        "due_at": run.due_at.isoformat(),
        "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "outcome": run.outcome,
        "error": run.error,
        "first_message_seq": run.first_message_seq,
        "last_message_seq": run.last_message_seq,
        "message_count": run.message_count,
        "worker": run.worker,
        "approval_id": str(run.approval_id) if run.approval_id else None,
    }


def recall_history_dict(recall: Recall) -> dict[str, Any]:
    return {
        **recall_to_dict(recall),
        "fire_count": recall.fire_count,
        "last_fired_at": recall.last_fired_at.isoformat() if recall.last_fired_at else None,
        "created_at": recall.created_at.isoformat(),
        "updated_at": recall.updated_at.isoformat(),
        "runs": [run_to_dict(r) for r in recall.runs.all()],
    }
