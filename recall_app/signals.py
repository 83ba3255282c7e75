"""Signals other apps listen to (notifications), so that recall_app imports none of them.

``recall_run_finished`` is sent once an occurrence's outcome is committed, with keyword
arguments ``recall_id``, ``session_id``, ``owner_id``, ``outcome`` (``RecallRun.Outcome``:
success, max_iterations, stopped, error, interrupted, …), ``error`` (text, "" on success) and
``run_id`` (the ``RecallRun`` row, None when unknown). A receiver that fails is logged and never
undoes or interrupts the recall (sent with ``send_robust``).
"""
from __future__ import annotations

from typing import Any

import structlog
from django.dispatch import Signal

log = structlog.get_logger(__name__)

recall_run_finished = Signal()


def send_run_finished(**kwargs: Any) -> None:
    for receiver, result in recall_run_finished.send_robust(sender="recall_app", **kwargs):
        if isinstance(result, Exception):
            log.error("recall_signal_receiver_failed", receiver=repr(receiver), error=repr(result),
                      recall_id=kwargs.get("recall_id"), exc_info=result)
