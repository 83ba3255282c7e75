"""Celery task: the daily purge of the audit log (beat, ``approvals-purge``)."""
from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(name="approvals.purge", ignore_result=True)
def purge() -> dict[str, Any]:
    """Delete audit entries and approvals older than AUDIT_RETENTION_DAYS; expire stale pending ones."""
    from approvals_app.services import audit_purge

    return audit_purge()
