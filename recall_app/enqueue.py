"""Where the recall app enqueues its Celery tasks (by name: see navi_site.enqueue)."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from navi_site.enqueue import send


def fire_occurrence(recall_id: str, due: datetime) -> None:
    """Send the ``recall.fire`` task of one occurrence, due at ``due``.

    Occurrences further away than RECALL_ETA_HORIZON_SECONDS get no ETA task: a Redis
    broker redelivers unacknowledged ETA messages after its visibility timeout, and a
    worker would hold days-long ETAs in memory. The sweep fires those when they are due.
    """
    horizon = timedelta(seconds=int(getattr(settings, "RECALL_ETA_HORIZON_SECONDS", 3000)))
    now = timezone.now()
    if due - now > horizon:
        return
    send("recall.fire", recall_id, due.isoformat(), eta=due if due > now else None)
