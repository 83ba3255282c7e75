"""`python manage.py purge_session_files`: delete expired session uploads now."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Delete uploaded session files older than SESSION_FILES_TTL_HOURS."

    def handle(self, *args: Any, **options: Any) -> None:
        from sessions_app.files import files_purge

        count = files_purge()
        self.stdout.write(f"Removed {count} expired file(s).")
