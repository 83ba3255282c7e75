"""Sending deliveries to the worker once the notification is committed (services never import tasks)."""
from __future__ import annotations

from functools import partial

import structlog
from django.db import transaction

log = structlog.get_logger(__name__)


def send_delivery(delivery_id: int, *, attempt: int = 0, countdown: float | None = None) -> None:
    from notify_app.tasks import deliver

    try:
        deliver.apply_async(args=[delivery_id, attempt], countdown=countdown)
    except Exception:  # noqa: BLE001 - the sweep sends it later
        log.warning("notify_enqueue_failed", delivery_id=delivery_id, exc_info=True)


def on_commit_deliver(delivery_id: int) -> None:
    transaction.on_commit(partial(send_delivery, delivery_id), robust=True)
