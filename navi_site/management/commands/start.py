"""`python manage.py start`: run Navi.

Embedded mode (default): one process with the ASGI server, a Celery worker and
Celery beat, SQLite, in-memory channel layer and broker. Scale-out mode
(REDIS_URL + PostgreSQL DATABASE_URL): only the ASGI server; run `celery -A
navi_site worker` and `celery -A navi_site beat` as separate processes (Procfile).
"""
from __future__ import annotations

import asyncio
import gc
import signal
import sys

import structlog
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from navi_site import startup

log = structlog.get_logger(__name__)


class Command(BaseCommand):
    help = "Run Navi (embedded: server + Celery worker + beat in one process)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--host", default=None, help="Listen address (default NAVI_HOST)")
        parser.add_argument("--port", type=int, default=None, help="Port (default NAVI_PORT)")
        parser.add_argument("--no-migrate", action="store_true", help="Do not apply migrations on start")
        parser.add_argument("--no-worker", action="store_true", help="Embedded mode without worker/beat")

    def handle(self, *args, host: str | None, port: int | None, no_migrate: bool, no_worker: bool, **opts):  # type: ignore[no-untyped-def]
        host = host or settings.NAVI_HOST
        port = port or settings.NAVI_PORT
        try:
            startup.check_scaleout_config()
            startup.check_database()
            startup.check_redis()
            startup.check_port_free(host, port)
        except startup.StartupError as exc:
            raise CommandError(str(exc)) from None
        if not no_migrate:
            call_command("migrate", interactive=False, verbosity=0)
        from notify_app.vapid import vapid

        vapid()  # the Web Push key pair: made on the first run, kept in the data directory
        self._recover_turns()
        embedded = None
        if settings.NAVI_MODE == "embedded" and not no_worker:
            from navi_site.embedded import EmbeddedCelery

            embedded = EmbeddedCelery()
            embedded.start()
        self.stdout.write(f"Navi ({settings.NAVI_MODE} mode) on http://{host}:{port}/ — Ctrl-C to stop.")
        sys.stdout.flush()
        from navi_site import serverfile

        if settings.NAVI_MODE == "embedded":
            serverfile.write(host=host, port=port)  # manage.py fire_recall hands its run to this server
        try:
            self._serve(host, port)
        finally:
            serverfile.remove()
            if embedded is not None:
                embedded.stop()
            self.stdout.write("Navi stopped.")

    def _recover_turns(self) -> None:
        """Turns cut off by the last stop (Ctrl-C, a crash) keep their partial answer, marked interrupted."""
        from sessions_app.runs.recovery import recover_turns

        try:
            closed = recover_turns()
        except Exception:  # noqa: BLE001 - never block start-up; beat retries every 15 s
            log.exception("turn_recovery_failed")
            return
        if closed:
            self.stdout.write(f"{len(closed)} turn(s) cut off when Navi last stopped were kept and marked interrupted.")

    def _serve(self, host: str, port: int) -> None:
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server

        from navi_site import wsoptions
        from navi_site.asgi import application
        from navi_site.embedded import begin_shutdown
        from sessions_app.bus import register_server_loop
        from sessions_app.runs.drafts import flush_all_blocking

        wsoptions.raise_open_files_limit()  # 1 000+ WebSockets need more than the usual 1 024 fds

        def ready() -> None:  # daphne built its factories; the reactor is not running yet
            from twisted.internet import reactor

            wsoptions.configure_factory(server.ws_factory)
            register_server_loop(asyncio.get_event_loop())
            reactor.addSystemEventTrigger("before", "shutdown", begin_shutdown)
            if settings.NAVI_MODE == "embedded":  # scale-out runs it as its own process (Procfile)
                from telegram_app import runner

                if runner.enabled():
                    runner.start_in_server(asyncio.get_event_loop(), reactor)
            reactor.addSystemEventTrigger("before", "shutdown", flush_all_blocking)  # the last second too
            for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C and `kill` both stop cleanly
                signal.signal(sig, lambda *_: reactor.callFromThread(reactor.stop))
            # Everything imported and built so far lives as long as the server: out of the
            # collector's sight, a full collection no longer walks it (~150 000 objects; with 100
            # sessions streaming a full collection stalled the loop 120-210 ms, now 35-90 ms).
            gc.collect()
            gc.freeze()
            log.info("server_ready", host=host, port=port)

        server = Server(
            application=application,
            endpoints=build_endpoint_description_strings(host=host, port=port),
            ready_callable=ready,
            websocket_max_message_size=32 * 1024 * 1024,
            websocket_max_frame_size=32 * 1024 * 1024,
            application_close_timeout=10,
            # daphne pings every 20 s by default: with our heartbeat after 20 s of silence, an idle
            # tab cost two frames out and one in every 20 s. Dead clients are still found (ping + 30 s).
            ping_interval=settings.WS_PING_SECONDS,
            ping_timeout=30,
            verbosity=0,
        )
        server.run()
