"""manage.py rebuild_memory_summary [--user U]: rewrite the narrative summary now."""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from memory_app.management.commands.extract_memory import resolve_user
from memory_app.models import MemoryFact
from memory_app.summary import summary_rebuild


class Command(BaseCommand):
    help = "Rewrite the memory summary of --user U, or of every user who has facts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", help="username or id")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["user"]:
            users = [resolve_user(options["user"])]
        else:
            ids = MemoryFact.objects.values_list("user_id", flat=True).distinct()
            users = list(get_user_model().objects.filter(pk__in=ids).order_by("pk"))
        for user in users:
            summary = summary_rebuild(user_id=user.pk, force=True)
            if summary is None:
                self.stdout.write(f"{user}: failed (the model did not answer; the old summary stays)")
            else:
                self.stdout.write(f"{user}: {len(summary.text)} characters")
