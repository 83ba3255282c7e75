"""Where notifications come from: the features' signals and hooks, turned into ``dispatch.notify``.

* a recall run finished (its report's first lines) or failed — ``recall_app.signals``;
* a long turn (NOTIFY_LONG_TURN_SECONDS) ended while no visible tab showed its session —
  ``sessions_app.hooks.on_turn_ended`` and ``sessions_app.presence``;
* a call waits for approval: a parked recall run always, a live turn's when no visible client
  (tab, or the Telegram chat that streams it) shows its session — ``approvals_app.signals``. The
  notification carries ``data["approval_id"]``: Telegram turns it into inline buttons, push and
  e-mail link to the session, whose replay shows the card.

Each handler runs after the feature's own work is committed, in the thread that did it, and
never raises into it.
"""
from __future__ import annotations

from typing import Any

import structlog
from django.conf import settings

from notify_app import kinds
from notify_app.dispatch import first_lines, notify

log = structlog.get_logger(__name__)

FINISHED_OUTCOMES = frozenset({"success", "max_iterations"})
FAILED_OUTCOMES = frozenset({"error", "interrupted"})


def connect() -> None:
    from approvals_app.signals import approval_created
    from recall_app.signals import recall_run_finished
    from sessions_app.hooks import on_turn_ended
    from sessions_app.presence import on_unwatched

    recall_run_finished.connect(on_recall_finished, dispatch_uid="notify_app.recall_finished")
    approval_created.connect(on_approval_created, dispatch_uid="notify_app.approval_created")
    on_turn_ended(on_long_turn)
    on_unwatched(on_session_unwatched)


def _session_title(session_id: str) -> str:
    from sessions_app.models import Session

    title = Session.objects.filter(pk=session_id).values_list("title", flat=True).first()
    return title or "a conversation"


def _report(session_id: str, run_id: int | None) -> str:
    """The recall run's last answer (the report the agent ended with)."""
    from recall_app.models import RecallRun
    from sessions_app.models import Message

    run = RecallRun.objects.filter(pk=run_id).first() if run_id else None
    rows = Message.objects.filter(session_id=session_id, role=Message.Role.ASSISTANT).exclude(
        buffer=Message.Buffer.CONTEXT).exclude(content__isnull=True).exclude(content="")
    if run is not None and run.first_message_seq is not None:
        rows = rows.filter(seq__gte=run.first_message_seq)
        if run.last_message_seq is not None:
            rows = rows.filter(seq__lte=run.last_message_seq)
    return rows.order_by("-seq").values_list("content", flat=True).first() or ""


def on_recall_finished(sender: Any, *, recall_id: str, session_id: str, owner_id: int | None, outcome: str,
                       error: str = "", run_id: int | None = None, **_: Any) -> None:
    if owner_id is None or not session_id:
        return
    title = _session_title(session_id)
    key = f"recall-run:{run_id}" if run_id else ""
    if outcome in FINISHED_OUTCOMES:
        report = first_lines(_report(session_id, run_id)) or "It finished without a written report."
        notify(user_id=owner_id, kind=kinds.RECALL_FINISHED, title=f"Recall finished · {title}", body=report,
               session_id=session_id, data={"recall_id": recall_id}, dedupe_key=key)
    elif outcome in FAILED_OUTCOMES:
        reason = first_lines(error) or "The run ended without a result."
        notify(user_id=owner_id, kind=kinds.RECALL_FAILED, title=f"Recall failed · {title}", body=reason,
               session_id=session_id, data={"recall_id": recall_id}, dedupe_key=key)


def on_long_turn(ended: Any) -> None:
    """A turn that ran longer than NOTIFY_LONG_TURN_SECONDS and ended unseen. Recalls notify through
    their own kinds; a stopped turn was stopped by someone who is looking."""
    from sessions_app.presence import watching

    if ended.is_recall or ended.user_id is None or ended.outcome == "stopped":
        return
    if ended.seconds < float(getattr(settings, "NOTIFY_LONG_TURN_SECONDS", 60)):
        return
    if watching(ended.session_id).visible:
        return
    title = _session_title(ended.session_id)
    if ended.outcome.startswith("error"):
        head, body = f"Navi's turn failed · {title}", first_lines(ended.outcome.partition(":")[2])
    else:
        head, body = f"Navi finished · {title}", first_lines(ended.content)
    notify(user_id=ended.user_id, kind=kinds.LONG_TURN, title=head, body=body, session_id=ended.session_id)


def approval_body(approval: Any) -> str:
    """What the call is, why it asks and what it touches, in a few plain lines."""
    lines = [f"Navi wants to run {approval.tool}" + (" (in a subagent)" if approval.is_subagent else "") + "."]
    if approval.reason:
        lines.append(f"Why it asks: {approval.reason}.")
    if approval.touches:
        lines.append(f"Touches: {approval.touches}")
    if approval.tainted_by:
        lines.append(f"This turn read {', '.join(list(approval.tainted_by)[:3])}: content from there may be "
                     "steering this request.")
    lines.append(f"Waits until {approval.expires_at:%Y-%m-%d %H:%M} UTC; no answer counts as Deny.")
    return "\n".join(lines)


def on_approval_created(sender: Any, *, approval: Any, **_: Any) -> None:
    """A call waits for its owner. A parked recall run always notifies; a live turn only when no
    visible client shows its session (someone looking at the card needs no push)."""
    from sessions_app.presence import watching

    if approval.origin != "recall" and watching(str(approval.session_id)).visible:
        return
    _notify_approval(approval)


def on_session_unwatched(session_id: str) -> None:
    """The last visible client of a session hid its page or left: a live approval that was seen
    when it opened is now waiting unseen (the dedupe key keeps it to one notification)."""
    from approvals_app.models import Approval
    from approvals_app.selectors import approvals_of_session

    for approval in approvals_of_session(session_id=session_id, status=Approval.Status.PENDING).filter(
            origin=Approval.Origin.LIVE).select_related("user", "session")[:5]:
        _notify_approval(approval)


def _notify_approval(approval: Any) -> None:
    if approval.origin == "recall":
        kind, head = kinds.RECALL_APPROVAL, "A recall waits for your approval"
    else:
        kind, head = kinds.APPROVAL_WAITING, "Navi waits for your approval"
    title = _session_title(str(approval.session_id))
    notify(user_id=approval.user_id, kind=kind, title=f"{head} · {approval.tool} · {title}",
           body=approval_body(approval), session_id=str(approval.session_id),
           data={"approval_id": str(approval.pk), "tool": approval.tool}, dedupe_key=f"approval:{approval.pk}")
