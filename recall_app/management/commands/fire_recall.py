"""``manage.py fire_recall ID``: fire a pending recall now, synchronously, through the normal claim."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from recall_app.models import Recall


class Command(BaseCommand):
    help = "Fire a pending recall now (same claim, capacity and bookkeeping as the scheduler)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("recall_id")

    def handle(self, *args: Any, **opts: Any) -> None:
        from recall_app.firing import fire_recall

        recall = Recall.objects.filter(pk=_uuid(opts["recall_id"])).first()
        if recall is None:
            raise CommandError(f"Recall {opts['recall_id']} not found.")
        if recall.status != Recall.Status.PENDING:
            raise CommandError(f"Recall {recall.id} is {recall.status}, not pending: nothing to fire.")
        result = fire_recall(str(recall.id), worker="manage.py fire_recall", force=True)
        recall.refresh_from_db()
        self.stdout.write(f"{result}: recall {recall.id} is now {recall.status}, next {recall.trigger_at.isoformat()}")
        if result in {"at_capacity", "not_claimable"}:
            raise CommandError("The recall was not fired (" + result.replace("_", " ") + ").")


def _uuid(value: str) -> str:
    import uuid

    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise CommandError(f"{value!r} is not a recall id (a UUID).") from None
