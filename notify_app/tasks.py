"""Celery tasks: ``notify.deliver`` (one attempt of one delivery; schedules the next on a passing
failure) and ``notify.sweep`` (beat: re-sends deliveries whose task was lost). Idempotent: an
attempt claims the delivery first (``notify_app.delivery``)."""
from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(name="notify.deliver", ignore_result=True)
def deliver(delivery_id: int, attempt: int = 0) -> str:
    from notify_app.delivery import delivery_attempt

    result = delivery_attempt(delivery_id, attempt=attempt)
    if result.retry_in is not None:
        deliver.apply_async(args=[delivery_id, result.attempt], countdown=result.retry_in)
    return result.status


@shared_task(name="notify.sweep", ignore_result=True)
def sweep() -> dict[str, Any]:
    from notify_app.delivery import stale_pending

    stale = stale_pending()
    for delivery_id, attempts in stale:
        deliver.apply_async(args=[delivery_id, attempts])
    return {"resent": len(stale)}
