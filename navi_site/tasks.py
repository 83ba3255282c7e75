"""Navi-wide periodic jobs."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="navi.backup", ignore_result=True)
def daily_backup() -> str:
    """The daily backup (beat): a new archive in NAVI_BACKUP_DIR, then only the newest NAVI_BACKUP_KEEP kept."""
    import structlog
    from django.conf import settings

    from navi_site.backup import BackupError, backup_create, backup_prune

    log = structlog.get_logger(__name__)
    keep = int(settings.NAVI_BACKUP_KEEP)
    if keep <= 0:
        return "off"
    try:
        path = backup_create()
    except BackupError as exc:
        log.error("backup_failed", error=str(exc))
        return f"failed: {exc}"
    removed = backup_prune(folder=path.parent, keep=keep)
    log.info("backup_written", path=str(path), pruned=len(removed))
    return str(path)
