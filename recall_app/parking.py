"""A recall run that parks on an approval (issue 20): its run history says "waiting for your
approval" while the call waits, and the banner shows it (``recall_update`` with action
``waiting_approval``, then ``resumed``). Receivers of ``approvals_app.signals``."""
from __future__ import annotations

from typing import Any

import structlog

from recall_app import notify
from recall_app.models import Recall, RecallRun

log = structlog.get_logger(__name__)


def _open_run(session_id: Any) -> tuple[Recall, RecallRun] | None:
    recall = Recall.objects.filter(session_id=session_id, status=Recall.Status.FIRING).first()
    if recall is None:
        return None
    run = recall.runs.filter(finished_at__isnull=True, claim_token=recall.claim_token).order_by("-started_at").first()
    return (recall, run) if run is not None else None


def on_created(sender: Any, approval: Any, **_: Any) -> None:
    if approval.origin != "recall":
        return
    found = _open_run(approval.session_id)
    if found is None:
        return
    recall, run = found
    run.outcome, run.approval_id = RecallRun.Outcome.WAITING_APPROVAL, approval.pk
    run.save(update_fields=["outcome", "approval_id"])
    notify.on_commit_publish(recall, "waiting_approval")
    log.info("recall_parked", recall_id=str(recall.pk), approval_id=str(approval.pk), tool=approval.tool)


def on_resolved(sender: Any, approval: Any, **_: Any) -> None:
    if approval.origin != "recall":
        return
    updated = RecallRun.objects.filter(approval_id=approval.pk, finished_at__isnull=True,
                                       outcome=RecallRun.Outcome.WAITING_APPROVAL).update(
        outcome=RecallRun.Outcome.RUNNING, approval_id=None)
    found = _open_run(approval.session_id) if updated else None
    if found is not None:
        notify.on_commit_publish(found[0], "resumed")
        log.info("recall_resumed", recall_id=str(found[0].pk), approval_id=str(approval.pk), status=approval.status)
