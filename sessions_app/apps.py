from __future__ import annotations

import uuid
from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _busy_flags(ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """``busy`` on every listed session: is a turn running (any process in scale-out)?"""
    from sessions_app.runs import get_run_registry

    busy = get_run_registry().busy_many([str(i) for i in ids])
    return {i: {"busy": str(i) in busy} for i in ids}


def _repair_search_index(using: str = "default", **_: Any) -> None:
    """SQLite drops a table's triggers when a migration rebuilds the table: put the search index's
    back (and re-index) after every migrate, so no later migration can leave search stale."""
    from django.db import connections

    from sessions_app.search import schema

    if schema.repair(connections[using]):
        import structlog

        structlog.get_logger(__name__).warning("search_index_rebuilt", reason="its triggers were missing")


class SessionsAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sessions_app"

    def ready(self) -> None:
        from agent import ports
        from sessions_app.hooks import add_flag_provider
        from sessions_app.runs.steering_port import RegistrySteering
        from sessions_app.store import DjangoSessionStore

        ports.provide(session_store=DjangoSessionStore(), steering=RegistrySteering())
        add_flag_provider(_busy_flags)
        post_migrate.connect(_repair_search_index, sender=self, dispatch_uid="sessions_app.search.repair")
