"""manage.py export_sessions --user U [--format json|md|html] [--out DIR]: one file per session (backups).

The JSON files can be imported again (POST /sessions/import). Each file is written as it streams,
so a long session costs the memory of one page of messages.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from sessions_app.export import ExportContext, export_chunks, export_filename
from sessions_app.export.reader import last_turn_events
from sessions_app.models import Session


class Command(BaseCommand):
    help = "Export every conversation of a user, one file per conversation (JSON files can be imported again)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--user", required=True, help="The username whose conversations to export.")
        parser.add_argument("--format", default="json", choices=["json", "md", "html"])
        parser.add_argument("--out", default=".", help="The directory to write into (created if missing).")

    def handle(self, *args: Any, **opts: Any) -> None:
        from agent import ports

        user = get_user_model().objects.filter(username=opts["user"]).first()
        if user is None:
            raise CommandError(f"No user named {opts['user']!r}. Users: "
                               + ", ".join(get_user_model().objects.values_list("username", flat=True)[:20]))
        out = Path(opts["out"]).expanduser()
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CommandError(f"Cannot create the directory {out}: {exc.strerror}.") from None
        fmt = opts["format"]
        count = 0
        for session in Session.objects.filter(owner=user).select_related("profile").order_by("created_at"):
            path = out / export_filename(session, fmt)
            # The replay log of the last turn: in scale-out it is in Redis, which this process reads as
            # the server does; embedded, it lives in the server's memory, out of this process's reach.
            events = last_turn_events(str(session.id)) if fmt == "json" and settings.REDIS_URL else None
            ctx = ExportContext(session=session, todo=list(ports.todo().read(str(session.id))), events=events)
            with open(path, "w", encoding="utf-8") as fh:
                for chunk in export_chunks(ctx, fmt):
                    fh.write(chunk)
            count += 1
            self.stdout.write(str(path))
        self.stdout.write(self.style.SUCCESS(f"Exported {count} conversation(s) of {user.get_username()} to {out}."))
