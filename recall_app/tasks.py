"""Celery tasks: ``recall.fire`` (one per occurrence, sent with eta=trigger_at) and
``recall.sweep`` (beat, every RECALL_SWEEP_SECONDS, 5 s by default: the safety net for lost
tasks and dead workers).

Both are idempotent: firing claims the occurrence with a status transition first.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

import structlog
from celery import shared_task

log = structlog.get_logger(__name__)


@shared_task(name="recall.fire", bind=True, ignore_result=True)
def fire(self: Any, recall_id: str, due_iso: str | None = None) -> str:
    """Fire the occurrence of ``recall_id`` that was due at ``due_iso`` (a no-op if it is gone)."""
    from recall_app.firing import default_worker, fire_recall

    due = datetime.fromisoformat(due_iso) if due_iso else None
    worker = getattr(self.request, "hostname", None) or default_worker()
    return fire_recall(recall_id, due=due, worker=worker)


@shared_task(name="recall.sweep", ignore_result=True)
def sweep() -> dict[str, Any]:
    from recall_app.firing import sweep as run_sweep

    return run_sweep()

