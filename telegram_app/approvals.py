"""Approvals in Telegram: a card with inline buttons (Approve once / Approve for this session / Deny).

A card reaches a chat two ways: as the notification of an approval (``channel.TelegramChannel``,
for a parked recall run or a live turn nobody looks at) and, in a turn started from the chat, as
the turn's own approval card (``stream.TurnStreamer``). Either way the message is recorded
(``ApprovalMessage``), so that when the approval ends — decided here, in a browser, expired or
cancelled — every card of it is edited to say how it ended and loses its buttons.

A press decides through ``approvals_app.services.approval_decide``, the service the browser uses:
exactly one decision counts, and a press on a decided, expired or unknown approval is answered
with the reason instead. Callback data is ``<action>:<approval id>``; Telegram lets anyone craft
callback data, so the decision is checked against the chat's linked user like any other.
"""
from __future__ import annotations

import concurrent.futures
from datetime import datetime
from typing import Any

import structlog
from django.conf import settings
from django.utils import timezone

from telegram_app.models import ApprovalMessage
from telegram_app.render import MAX_MESSAGE

log = structlog.get_logger(__name__)

# callback action -> (decision, scope, what the user is told)
ACTIONS = {
    "approve": ("approve", "once", "Approved once: Navi goes on."),
    "approves": ("approve", "session", "Approved for this session: Navi goes on."),
    "deny": ("deny", "once", "Denied: Navi will not run it."),
}
_edits = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="telegram-approval-edit")


def keyboard(approval_id: str) -> dict[str, Any]:
    """The Bot API's InlineKeyboardMarkup for one approval."""
    return {"inline_keyboard": [
        [{"text": "✅ Approve once", "callback_data": f"approve:{approval_id}"},
         {"text": "Approve for this session", "callback_data": f"approves:{approval_id}"}],
        [{"text": "🚫 Deny", "callback_data": f"deny:{approval_id}"}],
    ]}


def _when(value: datetime | str | None) -> str:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return ""
    if value is None:
        return ""
    return timezone.localtime(value, timezone.get_default_timezone()).strftime("%H:%M %Z").strip()


def card_text(*, tool: str, reason: str, touches: str = "", tainted_by: list[str] | tuple[str, ...] = (),
              expires_at: datetime | str | None = None, is_subagent: bool = False) -> str:
    """The card: the tool, a one-line reason, what it touches, what tainted the turn, the deadline."""
    who = "A subagent wants" if is_subagent else "Navi wants"
    lines = [f"⏸ {who} to run {tool}"]
    if reason:
        lines.append(f"Why it asks: {reason.strip().rstrip('.')}.")
    if touches:
        lines.append(f"Touches: {touches}")
    if tainted_by:
        shown = ", ".join(list(tainted_by)[:3])
        lines.append(f"⚠ This turn read {shown}: content from there may be steering this request.")
    until = _when(expires_at)
    if until:
        lines.append(f"Waits until {until}; no answer counts as Deny.")
    return "\n".join(lines)[: MAX_MESSAGE - 200]


def outcome_line(approval: Any) -> str:
    """How the approval ended, as the card's last line."""
    by = f" by {approval.decided_by.get_username()}" if approval.decided_by_id and approval.decided_by else ""
    status, scope = approval.status, approval.scope
    if status == "approved":
        return f"✅ Approved for this session{by}." if scope == "session" else f"✅ Approved once{by}."
    if status == "denied":
        why = f" Reason: {approval.decision_reason}" if approval.decision_reason else ""
        return f"🚫 Denied{by}.{why}"
    if status == "expired":
        return "⌛ Expired: nobody decided in time, so it counted as Deny."
    if status == "cancelled":
        return f"⏹ Cancelled ({approval.decision_reason or 'the turn ended'}); it did not run."
    return ""


def settled_text(text: str, approval: Any) -> str:
    line = outcome_line(approval)
    return f"{text}\n\n{line}"[:MAX_MESSAGE] if line else text


def record(*, approval_id: str, chat_id: int, message_id: int, text: str) -> ApprovalMessage:
    """Remember a card so its end can be shown in it."""
    return ApprovalMessage.objects.create(approval_id=approval_id, chat_id=chat_id, message_id=message_id,
                                          text=text[:MAX_MESSAGE])


def decide(*, link: Any, action: str, approval_id: str, chat_id: int, message_id: int | None) -> tuple[str, str | None]:
    """A button press (blocking). Returns (the answer the press gets, the card's new text or None).

    Every outcome is a clear answer: the first decision counts; a decided, expired or cancelled
    approval, an unknown one and a bad button each say so."""
    from approvals_app.models import Approval
    from approvals_app.services import approval_decide
    from navi_site.errors import BadRequest, Conflict, NotFound

    spec = ACTIONS.get(action)
    if spec is None:
        return "This button is no longer valid.", None
    decision, scope, told = spec
    try:
        approval = approval_decide(user=link.user, approval_id=approval_id, decision=decision, scope=scope)
    except NotFound:
        return "This approval is not in your conversations any more (it may have been deleted with its chat).", None
    except (Conflict, BadRequest) as exc:
        current = Approval.objects.select_related("decided_by").filter(pk=approval_id, user=link.user).first()
        return exc.message, _settle_here(current, chat_id, message_id)
    approval = Approval.objects.select_related("decided_by").get(pk=approval.pk)
    return told, _settle_here(approval, chat_id, message_id)


def _settle_here(approval: Any, chat_id: int, message_id: int | None) -> str | None:
    """The pressed card's final text (and it needs no later edit)."""
    if approval is None or message_id is None or approval.status == "pending":
        return None
    row = ApprovalMessage.objects.filter(approval_id=approval.pk, chat_id=chat_id, message_id=message_id).first()
    if row is None:
        return None
    ApprovalMessage.objects.filter(pk=row.pk).update(settled=True)
    return settled_text(row.text, approval)


def on_resolved(sender: Any, *, approval: Any, **_: Any) -> None:
    """``approvals_app.signals.approval_resolved``: show the end in every card still showing buttons.
    The edits go to a small thread pool: the thread that decided (a request, a run) does not wait
    for Telegram."""
    rows = list(ApprovalMessage.objects.filter(approval_id=approval.pk, settled=False))
    if not rows or not getattr(settings, "TELEGRAM_BOT_TOKEN", ""):
        return
    ApprovalMessage.objects.filter(pk__in=[r.pk for r in rows]).update(settled=True)
    for row in rows:
        _edits.submit(_edit, row.chat_id, row.message_id, settled_text(row.text, approval))


def _edit(chat_id: int, message_id: int, text: str) -> None:
    from telegram_app.botapi import api_call

    try:
        answer = api_call("editMessageText", {"chat_id": chat_id, "message_id": message_id, "text": text,
                                              "reply_markup": {"inline_keyboard": []}})
    except Exception as exc:  # noqa: BLE001 - cosmetic: a stale card answers its next press with the reason
        log.warning("telegram_approval_edit_failed", chat_id=chat_id, error=f"{type(exc).__name__}: {exc}")
        return
    if not answer.get("ok") and "not modified" not in str(answer.get("description") or ""):
        log.warning("telegram_approval_edit_refused", chat_id=chat_id, error=answer.get("description"))
