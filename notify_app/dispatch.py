"""The one dispatcher: every notification of every feature goes through ``notify``.

``notify`` records the notification and one ``Delivery`` per channel that the user chose for this
kind and that can reach them, and — once that commits — sends each delivery to the worker
(``notify.deliver``). A feature never talks to a channel itself. Nothing here raises into the
caller's work: a recall or a turn that notifies is never broken by a notification (callers run it
from after-commit hooks and signals; failures are logged).
"""
from __future__ import annotations

from typing import Any

import structlog
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from notify_app import channels, enqueue, selectors
from notify_app.kinds import CHANNELS, KINDS
from notify_app.models import Delivery, Notification

log = structlog.get_logger(__name__)

MAX_BODY_CHARS = 3500


def first_lines(text: str, *, lines: int = 4, chars: int = 300) -> str:
    """The start of a report for a notification: its first non-empty lines, cut at ``chars``."""
    kept = [line.rstrip() for line in (text or "").strip().splitlines() if line.strip()][:lines]
    out = "\n".join(kept)
    return out if len(out) <= chars else out[: chars - 1].rstrip() + "…"


def notify(*, user_id: int, kind: str, title: str, body: str = "", session_id: str | None = None,
           data: dict[str, Any] | None = None, dedupe_key: str = "") -> Notification | None:
    """Notify a user. Returns the notification, or None (unknown/inactive user, or ``dedupe_key``
    was used before: the same event is never notified twice). Raises ValueError for an unknown kind."""
    if kind not in KINDS:
        raise ValueError(f"unknown notification kind {kind!r}")
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        return None
    targets = [name for name in CHANNELS if _reaches(user, kind, name)]
    try:
        with transaction.atomic():
            notification = Notification.objects.create(
                user=user, kind=kind, title=title[:200], body=body[:MAX_BODY_CHARS], session_id=session_id,
                data=data or {}, dedupe_key=dedupe_key[:200])
            deliveries = Delivery.objects.bulk_create(
                [Delivery(notification=notification, channel=name) for name in targets])
            for delivery in deliveries:
                enqueue.on_commit_deliver(delivery.pk)
    except IntegrityError:
        log.info("notification_duplicate", user_id=user_id, kind=kind, dedupe_key=dedupe_key)
        return None
    log.info("notification_created", notification_id=notification.pk, user_id=user_id, kind=kind,
             channels=targets)
    return notification


def _reaches(user: Any, kind: str, name: str) -> bool:
    channel = channels.get(name)
    if channel is None or (KINDS[kind].choosable and not selectors.wants(user, kind, name)):
        return False
    try:
        return channel.status(user).available
    except Exception:  # noqa: BLE001 - a broken channel must not stop the others
        log.exception("notify_channel_status_failed", channel=name, user_id=user.pk)
        return False
