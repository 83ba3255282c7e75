"""The Celery app. Periodic schedules are defined in code (beat_schedule)."""
from __future__ import annotations

import os
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "navi_site.settings")

app = Celery("navi")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.conf.beat_schedule = {
    "memory-process-stale": {"task": "memory.process_stale_sessions", "schedule": 300.0},
    "recall-sweep": {"task": "recall.sweep", "schedule": 5.0},
    "purge-session-files": {"task": "sessions.purge_files", "schedule": 3600.0},
    "notify-sweep": {"task": "notify.sweep", "schedule": 300.0},
    "recover-turns": {"task": "sessions.recover_turns", "schedule": 15.0},
    "approvals-purge": {"task": "approvals.purge", "schedule": 24 * 3600.0},
    "daily-backup": {"task": "navi.backup", "schedule": 24 * 3600.0},  # keeps NAVI_BACKUP_KEEP; 0 = off
}


@app.on_after_configure.connect
def _configured_intervals(sender: Celery, **_: Any) -> None:
    """Intervals that come from Navi's configuration. Loading the Celery config reads the Django
    settings, so they are available here (and not yet when this module is imported)."""
    from django.conf import settings

    sender.conf.beat_schedule["recall-sweep"]["schedule"] = float(getattr(settings, "RECALL_SWEEP_SECONDS", 5))
