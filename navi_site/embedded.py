"""Embedded mode: the Celery worker and beat run as threads of the server process.

Same code paths as scale-out (tasks go through the broker, beat through
django-celery-beat's database scheduler); only the transports differ (memory://
broker, in-memory channel layer).
"""
from __future__ import annotations

import threading
from typing import Any

import structlog

log = structlog.get_logger(__name__)

_shutting_down = threading.Event()


def begin_shutdown() -> None:
    """The server started stopping (Ctrl-C, SIGTERM). The embedded worker keeps running while
    daphne closes its connections (up to 10 s): tasks that would start new work — a recall
    run — check ``shutting_down()`` and leave it for the next start instead."""
    _shutting_down.set()


def shutting_down() -> bool:
    return _shutting_down.is_set()


class EmbeddedCelery:
    """A Celery worker (thread pool) and beat in background threads of this process."""

    def __init__(self, *, concurrency: int | None = None, beat: bool = True) -> None:
        from django.conf import settings

        # Each headless recall run holds a worker thread for its whole run: keep room for other tasks.
        self.concurrency = concurrency or int(settings.RECALL_MAX_CONCURRENT) + 4
        self.with_beat = beat
        self.worker: Any = None
        self.beat: Any = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self, timeout: float = 20.0) -> None:
        from celery import worker as celery_worker
        from celery.beat import EmbeddedService

        from navi_site.celery import app

        app.finalize()
        app.set_current()
        ready = self._ready

        class _Worker(celery_worker.WorkController):
            def on_consumer_ready(self, consumer: Any) -> None:
                ready.set()

        self.worker = _Worker(
            app=app,
            pool="threads",
            concurrency=self.concurrency,
            hostname="embedded@navi",
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
        )
        self._thread = threading.Thread(target=self.worker.start, name="celery-worker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("The embedded Celery worker did not start within 20 s.")
        if self.with_beat:
            self.beat = EmbeddedService(app, thread=True, scheduler_cls=app.conf.beat_scheduler)
            self.beat.start()
        log.info("embedded_celery_started", concurrency=self.concurrency, beat=self.with_beat)

    def stop(self, timeout: float = 10.0) -> None:
        if self.beat is not None:
            self.beat.stop()
        if self.worker is not None:
            from celery.worker import state

            state.should_terminate = 0
            if self._thread is not None:
                self._thread.join(timeout)
            state.should_terminate = None
        log.info("embedded_celery_stopped")
