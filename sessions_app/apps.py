from __future__ import annotations

import uuid
from typing import Any

from django.apps import AppConfig


def _busy_flags(ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """``busy`` on every listed session: is a turn running (any process in scale-out)?"""
    from sessions_app.runs import get_run_registry

    busy = get_run_registry().busy_many([str(i) for i in ids])
    return {i: {"busy": str(i) in busy} for i in ids}


class SessionsAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sessions_app"

    def ready(self) -> None:
        from agent import ports
        from sessions_app.hooks import add_flag_provider
        from sessions_app.store import DjangoSessionStore

        ports.provide(session_store=DjangoSessionStore())
        add_flag_provider(_busy_flags)
