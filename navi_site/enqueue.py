"""Sending Celery tasks by name, after the transaction that made them due commits.

Services never import task modules: a task module imports the services it calls, so importing it
back would be a circle. Instead each app names its tasks in its own ``enqueue.py`` (the one place
where it enqueues), built on ``send_after_commit``; the task object is looked up in the Celery
app's registry by name (autodiscovery imports the tasks modules on first use).
"""
from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

import structlog
from celery.exceptions import NotRegistered
from django.db import transaction

log = structlog.get_logger(__name__)


def task_named(name: str) -> Any:
    """The registered Celery task ``name``. Raises celery.exceptions.NotRegistered."""
    from navi_site.celery import app

    try:
        return app.tasks[name]
    except NotRegistered:
        app.loader.import_default_modules()  # runs autodiscovery: imports every app's tasks module
        return app.tasks[name]


def send(name: str, *args: Any, eta: datetime | None = None) -> None:
    """Send the task now (no transaction involved). Broker errors propagate."""
    task = task_named(name)
    if eta is None:
        task.delay(*args)
    else:
        task.apply_async(args=list(args), eta=eta)


def _send_logged(name: str, args: tuple[Any, ...], eta: datetime | None) -> None:
    try:
        send(name, *args, eta=eta)
    except Exception:  # noqa: BLE001 - a broker hiccup must not undo a committed change; sweeps retry
        log.exception("task_enqueue_failed", task=name)


def send_after_commit(name: str, *args: Any, eta: datetime | None = None) -> None:
    """Send the task once the current transaction commits (at once outside a transaction).

    A failing broker is logged, never raised: the state change stands, and the app's periodic
    sweep picks up what was not sent.
    """
    transaction.on_commit(partial(_send_logged, name, args, eta), robust=True)
