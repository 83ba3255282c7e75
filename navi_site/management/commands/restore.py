"""`python manage.py restore FILE`: put a backup back, all of it or nothing."""
from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from navi_site.backup import BackupError, backup_restore


class Command(BaseCommand):
    help = ("Restore a backup made by `manage.py backup`. Stop Navi first. The archive is checked completely "
            "(format, checksums) and staged before anything is replaced; what was in place is kept aside as "
            "*.before-restore-<time>.")

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("archive", type=Path)

    def handle(self, *args, archive: Path, **opts) -> None:  # type: ignore[no-untyped-def]
        try:
            restored = backup_restore(archive=archive)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Restored {archive}.")
        for item in restored.kept:
            self.stdout.write(f"  kept the previous {item}")
        self.stdout.write("Start Navi again; delete the kept copies once you are happy with the restore.")
