"""The Celery app. Periodic schedules are defined in code (beat_schedule)."""
from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "navi_site.settings")

app = Celery("navi")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.conf.beat_schedule = {
    "memory-process-stale": {"task": "memory.process_stale_sessions", "schedule": 300.0},
    "recall-sweep": {"task": "recall.sweep", "schedule": 5.0},
    "purge-session-files": {"task": "sessions.purge_files", "schedule": 3600.0},
}
