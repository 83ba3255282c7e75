"""``manage.py list_recalls [--status S] [--session ID]``: recalls with their next trigger and last run."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from recall_app.models import Recall


class Command(BaseCommand):
    help = "List recalls (newest first)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--status", choices=Recall.Status.values, help="Only recalls in this status.")
        parser.add_argument("--session", help="Only recalls of this session id.")
        parser.add_argument("--limit", type=int, default=100)

    def handle(self, *args: Any, **opts: Any) -> None:
        qs = Recall.objects.select_related("session").prefetch_related("runs").order_by("-created_at")
        if opts["status"]:
            qs = qs.filter(status=opts["status"])
        if opts["session"]:
            try:
                qs = qs.filter(session_id=opts["session"])
            except Exception as exc:  # noqa: BLE001 - a malformed UUID
                raise CommandError(f"--session {opts['session']!r} is not a session id: {exc}") from None
        rows = list(qs[: opts["limit"]])
        if not rows:
            self.stdout.write("No recalls.")
            return
        for recall in rows:
            last = next(iter(recall.runs.all()), None)
            run = f"last run {last.outcome} at {last.started_at:%Y-%m-%d %H:%M:%S}" if last else "never ran"
            every = f" every {recall.interval_seconds}s" if recall.interval_seconds else ""
            self.stdout.write(
                f"{recall.id}  {recall.status:<9} {recall.call_type:<9}{every}  next {recall.trigger_at.isoformat()}  "
                f"session {recall.session_id}  fired {recall.fire_count}x, {run}"
            )
            if recall.internal_comment:
                self.stdout.write(f"    note: {recall.internal_comment}")
