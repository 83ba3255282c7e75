from __future__ import annotations

import uuid
from typing import Any

import structlog
from django.apps import AppConfig

log = structlog.get_logger(__name__)


def _pending_flags(ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    from recall_app.selectors import sessions_with_pending_recall

    pending = sessions_with_pending_recall(ids) if ids else set()
    return {sid: {"has_pending_recall": sid in pending} for sid in ids}


class RecallAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "recall_app"
    verbose_name = "Recalls"

    def ready(self) -> None:
        from recall_app.firing import end_claim_of_dead_turn, fire_deferred_after_turn
        from recall_app.selectors import filter_has_pending_recall
        from sessions_app.hooks import add_filter, add_flag_provider, on_turn_finished, on_turn_recovered

        add_flag_provider(_pending_flags)
        add_filter("has_pending_recall", filter_has_pending_recall)
        on_turn_finished(fire_deferred_after_turn)
        on_turn_recovered(end_claim_of_dead_turn)
        self._connect_approvals()
        self._register_tools()

    @staticmethod
    def _connect_approvals() -> None:
        from approvals_app.signals import approval_created, approval_resolved
        from recall_app import parking

        approval_created.connect(parking.on_created, dispatch_uid="recall_app.parking.created")
        approval_resolved.connect(parking.on_resolved, dispatch_uid="recall_app.parking.resolved")

    @staticmethod
    def _register_tools() -> None:
        try:
            from tools_app.registry import register_builtin
        except ImportError:  # the registry is optional for the rest of the app
            log.warning("recall_tools_not_registered", reason="tools_app.registry is not available")
            return
        from recall_app.tools import ManageRecallTool, ScheduleRecallTool

        register_builtin(ScheduleRecallTool)
        register_builtin(ManageRecallTool)
