from typing import Any

from django.apps import AppConfig


def _cancel_orphans(ended: Any) -> None:
    """A turn ended: approvals its run left pending (it died mid-wait) wait for nothing any more."""
    from approvals_app.services import approvals_cancel_orphans

    approvals_cancel_orphans(session_id=ended.session_id, run_id=ended.run_id)


class ApprovalsConfig(AppConfig):
    """Ask before acting (issue 20): the policy point's desk, approvals, rules and the audit log."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "approvals_app"
    verbose_name = "Approvals and audit"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from agent import ports
        from approvals_app import frames
        from approvals_app.desk import PolicyDesk
        from approvals_app.models import ToolRule
        from approvals_app.selectors import invalidate_rules
        from sessions_app.hooks import on_frame, on_turn_ended

        ports.provide(approvals=PolicyDesk())
        on_frame("approval", frames.handle)
        on_turn_ended(_cancel_orphans)

        def changed(**_: object) -> None:
            invalidate_rules()

        post_save.connect(changed, sender=ToolRule, dispatch_uid="approvals_app.toolrule.saved", weak=False)
        post_delete.connect(changed, sender=ToolRule, dispatch_uid="approvals_app.toolrule.deleted", weak=False)
