"""`python manage.py purge_audit [--days N]`: delete old audit entries and approvals now."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Delete audit entries and finished approvals older than AUDIT_RETENTION_DAYS (or --days)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=None, help="Keep this many days instead of the setting.")

    def handle(self, *args: Any, **options: Any) -> None:
        from approvals_app.services import audit_purge

        days = options["days"]
        if days is not None and days < 0:
            raise CommandError("--days must be 0 or more.")
        counts = audit_purge(days=days)
        self.stdout.write(f"Removed {counts['audit_entries']} audit entr(y/ies) and {counts['approvals']} "
                          f"approval(s); expired {counts['expired']} stale pending approval(s).")
