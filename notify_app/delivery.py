"""One attempt at one delivery, with retry and backoff decided here (the task only schedules it).

An attempt first claims the delivery: ``attempts`` goes from N to N+1 only if it is still N and
the delivery still pending, so a task delivered twice (a broker redelivery, the sweep) sends once.
Failures: ``DeliveryRetry`` (and any unexpected exception: a bug or a network fault is logged with
its traceback) is retried after NOTIFY_RETRY_BASE_SECONDS × 2^(attempt-1), at most
NOTIFY_MAX_ATTEMPTS attempts; ``DeliveryGone`` skips; ``DeliveryFailed`` fails at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from notify_app import channels
from notify_app.models import Delivery

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    status: str  # sent / failed / skipped / retry / not_claimed
    attempt: int = 0  # attempts made so far
    retry_in: float | None = None
    error: str = ""


def backoff(attempt: int) -> float:
    """Seconds before attempt ``attempt + 1`` (``attempt`` ≥ 1 attempts made)."""
    base = float(getattr(settings, "NOTIFY_RETRY_BASE_SECONDS", 30))
    return min(base * 2 ** (attempt - 1), float(getattr(settings, "NOTIFY_RETRY_MAX_SECONDS", 3600)))


def delivery_attempt(delivery_id: int, *, attempt: int) -> Attempt:
    """Make attempt number ``attempt + 1`` of a pending delivery. Never raises for a channel's failure."""
    claimed = Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING, attempts=attempt).update(
        attempts=F("attempts") + 1, updated_at=timezone.now())
    if not claimed:
        return Attempt(status="not_claimed", attempt=attempt)
    delivery = Delivery.objects.select_related("notification", "notification__user").get(pk=delivery_id)
    made = attempt + 1
    dlog = log.bind(delivery_id=delivery_id, channel=delivery.channel, notification_id=delivery.notification_id,
                    attempt=made)
    channel = channels.get(delivery.channel)
    try:
        if channel is None:
            raise channels.DeliveryFailed(f"the {delivery.channel} channel is not installed on this server")
        channel.send(delivery.notification, delivery.notification.user)
    except channels.DeliveryGone as exc:
        return _finish(delivery, Delivery.Status.SKIPPED, made, exc.message, dlog)
    except channels.DeliveryFailed as exc:
        return _finish(delivery, Delivery.Status.FAILED, made, exc.message, dlog)
    except Exception as exc:  # noqa: BLE001 - DeliveryRetry, or a fault we did not foresee: retry
        message = exc.message if isinstance(exc, channels.DeliveryRetry) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, channels.DeliveryRetry):
            dlog.exception("notify_delivery_crashed")
        if made >= int(getattr(settings, "NOTIFY_MAX_ATTEMPTS", 6)):
            return _finish(delivery, Delivery.Status.FAILED, made, f"gave up after {made} attempts: {message}", dlog)
        delay = backoff(made)
        Delivery.objects.filter(pk=delivery_id).update(last_error=message[:2000], updated_at=timezone.now())
        dlog.warning("notify_delivery_retry", error=message, retry_in=delay)
        return Attempt(status="retry", attempt=made, retry_in=delay, error=message)
    return _finish(delivery, Delivery.Status.SENT, made, "", dlog)


def _finish(delivery: Delivery, status: str, made: int, error: str, dlog: structlog.BoundLogger) -> Attempt:
    now = timezone.now()
    Delivery.objects.filter(pk=delivery.pk).update(status=status, last_error=error[:2000], updated_at=now,
                                                   sent_at=now if status == Delivery.Status.SENT else None)
    if status == Delivery.Status.SENT:
        dlog.info("notify_delivered")
    else:
        dlog.warning("notify_delivery_" + status, error=error)
    return Attempt(status=status, attempt=made, error=error)


def stale_pending(*, now: datetime | None = None) -> list[tuple[int, int]]:
    """(id, attempts) of pending deliveries whose task was lost (a restart dropped the in-memory
    broker's countdown, a worker died mid-send): untouched for longer than any backoff."""
    now = now or timezone.now()
    quiet = timedelta(seconds=float(getattr(settings, "NOTIFY_RETRY_MAX_SECONDS", 3600)) + 300)
    return list(Delivery.objects.filter(status=Delivery.Status.PENDING, updated_at__lt=now - quiet)
                .values_list("pk", "attempts")[:500])
