"""Hooks other apps subscribe to (notifications, Telegram, the recall banner), without importing us
more than this module.

Both are sent after the change commits, from the thread that made it (ORM use is fine), with
``approval=<approvals_app.models.Approval>`` (``select_related`` user, session, decided_by):

* ``approval_created``: a call waits for its owner's decision (``approval.origin`` is "live" or
  "recall"; a recall's is a parked run).
* ``approval_resolved``: it ended; ``approval.status`` is approved, denied, expired or cancelled.

Decide from any channel with ``approvals_app.services.approval_decide(user=, approval_id=,
decision="approve"|"deny", reason=None, scope="once"|"session")``. A receiver that raises is
logged and does not undo the change (``robust``).
"""
from __future__ import annotations

from django.dispatch import Signal

approval_created = Signal()
approval_resolved = Signal()
