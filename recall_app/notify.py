"""After-commit side effects of recall state changes: the ``recall_update`` event, the
``session_sync`` event and the Celery ETA task of the next occurrence.

All run in ``transaction.on_commit(..., robust=True)``: a failing broker or channel
layer is logged and never undoes the committed change (the sweep fires a recall
whose task was never sent; clients re-read the banner on reconnect).
"""
from __future__ import annotations

from functools import partial
from typing import Any

import structlog
from django.db import transaction

from agent.events import RecallUpdate, SessionSync
from recall_app import enqueue
from recall_app.models import Recall

log = structlog.get_logger(__name__)


def recall_event(recall: Recall, action: str) -> dict[str, Any]:
    return RecallUpdate(
        session_id=str(recall.session_id),
        recall_id=str(recall.id),
        call_type=recall.call_type,
        trigger_at=recall.trigger_at.isoformat(),
        status=recall.public_status,
        action=action,
    ).to_dict()


def _publish(session_id: str, event: dict[str, Any]) -> None:
    from sessions_app.bus import publish

    try:
        publish(session_id, event)
    except Exception:  # noqa: BLE001 - a lost notification must not break the state change
        log.warning("recall_publish_failed", session_id=session_id, event_type=event.get("type"), exc_info=True)


def on_commit_publish(recall: Recall, action: str) -> None:
    """Send ``recall_update`` (action scheduled/cancelled/fired/rescheduled) once the change commits."""
    transaction.on_commit(partial(_publish, str(recall.session_id), recall_event(recall, action)), robust=True)


def on_commit_session_sync(session_id: str) -> None:
    transaction.on_commit(partial(_publish, str(session_id), SessionSync().to_dict()), robust=True)


def on_commit_enqueue(recall: Recall) -> None:
    """Send the ETA task of the recall's next occurrence once the change commits."""
    transaction.on_commit(partial(enqueue.fire_occurrence, str(recall.id), recall.trigger_at), robust=True)
