"""`python manage.py backup [--out FILE]`: one archive with the database, files, tools, skills and keys."""
from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from navi_site.backup import BackupError, backup_create


class Command(BaseCommand):
    help = ("Write a backup archive (.tar.gz): a consistent snapshot of the database, the session files, your "
            "tools and skills, and the secret key, with a manifest of sha256 checksums. Safe while Navi runs.")

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--out", type=Path, default=None,
                            help="Archive to write (default: NAVI_BACKUP_DIR/navi-backup-<time>.tar.gz)")

    def handle(self, *args, out: Path | None, **opts) -> None:  # type: ignore[no-untyped-def]
        try:
            path = backup_create(out=out)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Backup written: {path} ({path.stat().st_size / 1024 / 1024:.1f} MB). "
                          f"Restore with: python manage.py restore {path}")
