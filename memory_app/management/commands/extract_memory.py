"""manage.py extract_memory [--user U] [--session S]: run memory extraction now, synchronously."""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_app import selectors
from memory_app.extraction import extract_session


def resolve_user(value: str) -> Any:
    """A user by username or numeric id. Raises CommandError."""
    users = get_user_model().objects
    user = users.filter(username=value).first() or (users.filter(pk=int(value)).first() if value.isdigit() else None)
    if user is None:
        raise CommandError(f"No user {value!r} (give a username or id).")
    return user


class Command(BaseCommand):
    help = ("Extract memory facts now. --session S runs even if S is not idle; otherwise the idle sessions "
            "(MEMORY_IDLE_MINUTES) with unprocessed messages, of --user U or of everybody.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", help="username or id")
        parser.add_argument("--session", action="append", default=[], help="session id (repeatable)")

    def handle(self, *args: Any, **options: Any) -> None:
        user = resolve_user(options["user"]) if options["user"] else None
        if options["session"]:
            session_ids: list[Any] = options["session"]
            explicit = True
        else:
            session_ids = selectors.stale_sessions(user_id=user.pk if user else None, limit=10_000)
            explicit = False
        if not session_ids:
            self.stdout.write("No idle session has unprocessed messages.")
            return
        for sid in session_ids:
            outcome = extract_session(sid, ignore_idle=explicit)
            line = (f"{outcome.session_id}: {outcome.status} — {outcome.created} new, {outcome.updated} updated, "
                    f"{outcome.forgotten} forgotten, up to message #{outcome.up_to_seq}")
            if outcome.error:
                line += f" ({outcome.error})"
            self.stdout.write(line)
