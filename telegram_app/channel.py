"""The Telegram notification channel: a message to every chat the user linked.

Sync (a Celery worker thread sends it), straight over the Bot API's HTTPS interface with httpx:
one ``sendMessage`` per chat. A chat that blocked the bot or is gone (403, 400 chat not found) is
unlinked; a 429 or a 5xx is a passing failure the dispatcher retries.
"""
from __future__ import annotations

from typing import Any

import httpx
import structlog
from django.conf import settings

from notify_app.channels import ChannelStatus, DeliveryFailed, DeliveryGone, DeliveryRetry
from notify_app.kinds import TELEGRAM
from notify_app.links import absolute_url
from notify_app.models import Notification
from telegram_app import approvals
from telegram_app.botapi import api_call
from telegram_app.models import TelegramLink
from telegram_app.render import MAX_MESSAGE

log = structlog.get_logger(__name__)



def message_text(notification: Notification) -> str:
    text = f"🔔 {notification.title}"
    if notification.body:
        text += f"\n\n{notification.body}"
    text += f"\n\nOpen in Navi: {absolute_url(notification.url)}"
    return text[: MAX_MESSAGE - 1]


def approval_message_text(notification: Notification) -> str:
    """An approval's notification: the title, the card (tool, reason, what it touches, taint) and the link."""
    text = f"🔔 {notification.title}"
    if notification.body:
        text += f"\n\n{notification.body}"
    text += f"\n\nOr decide in Navi: {absolute_url(notification.url)}"
    return text[: MAX_MESSAGE - 300]


def _approval_of(notification: Notification) -> Any:
    approval_id = notification.data.get("approval_id") if isinstance(notification.data, dict) else None
    if not approval_id:
        return None
    from approvals_app.models import Approval

    return Approval.objects.select_related("decided_by").filter(pk=approval_id, user=notification.user_id).first()


class TelegramChannel:
    name = TELEGRAM

    def status(self, user: Any) -> ChannelStatus:
        if not settings.TELEGRAM_BOT_TOKEN:
            return ChannelStatus(False, "The server has no Telegram bot: the administrator sets TELEGRAM_BOT_TOKEN.")
        count = TelegramLink.objects.filter(user=user).count()
        if not count:
            return ChannelStatus(False, "Link a Telegram chat below.")
        return ChannelStatus(True, f"To {count} linked chat{'s' if count != 1 else ''}")

    def send(self, notification: Notification, user: Any) -> None:
        links = list(TelegramLink.objects.filter(user=user))
        if not links or not settings.TELEGRAM_BOT_TOKEN:
            raise DeliveryGone("no linked Telegram chat")
        text, markup, approval = message_text(notification), None, _approval_of(notification)
        if approval is not None:  # an approval's notification is its card: buttons while it waits
            text = approval_message_text(notification)
            if approval.status == "pending":
                markup = approvals.keyboard(str(approval.pk))
            else:  # decided before this delivery ran: say how it ended instead
                text = approvals.settled_text(text, approval)
        sent, passing, permanent = 0, [], []
        for link in links:
            payload: dict[str, Any] = {"chat_id": link.chat_id, "text": text,
                                       "link_preview_options": {"is_disabled": True}}
            if markup:
                payload["reply_markup"] = markup
            try:
                answer = api_call("sendMessage", payload)
            except httpx.HTTPError as exc:
                passing.append(f"{type(exc).__name__}: {exc}")
                continue
            if answer.get("ok"):
                sent += 1
                if markup and approval is not None:
                    approvals.record(approval_id=str(approval.pk), chat_id=link.chat_id,
                                     message_id=int(answer["result"]["message_id"]), text=text)
                continue
            code, why = answer.get("error_code"), str(answer.get("description") or "")
            if code == 403 or (code == 400 and "chat not found" in why.lower()):
                log.info("telegram_chat_gone", chat_id=link.chat_id, user_id=user.pk, reason=why)
                link.delete()
            elif code == 429 or (isinstance(code, int) and code >= 500):
                passing.append(f"Telegram {code}: {why}")
            else:
                permanent.append(f"Telegram {code}: {why}")
        if sent:
            return
        if passing:
            raise DeliveryRetry("; ".join(passing))
        if permanent:
            raise DeliveryFailed("; ".join(permanent))
        raise DeliveryGone("every linked chat blocked the bot or is gone")
