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
from telegram_app.models import TelegramLink
from telegram_app.render import MAX_MESSAGE

log = structlog.get_logger(__name__)

TIMEOUT = httpx.Timeout(15.0, connect=5.0)


def message_text(notification: Notification) -> str:
    text = f"🔔 {notification.title}"
    if notification.body:
        text += f"\n\n{notification.body}"
    text += f"\n\nOpen in Navi: {absolute_url(notification.url)}"
    return text[: MAX_MESSAGE - 1]


def api_call(method: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST one Bot API method; the decoded answer (``ok`` true or false). Raises httpx errors."""
    url = f"{settings.TELEGRAM_API_URL.rstrip('/')}/bot{settings.TELEGRAM_BOT_TOKEN}/{method}"
    with httpx.Client(timeout=TIMEOUT) as client:
        resp = client.post(url, json=payload)
    try:
        data = resp.json()
    except ValueError:
        data = {"ok": False, "error_code": resp.status_code, "description": resp.text[:200]}
    return data if isinstance(data, dict) else {"ok": False, "error_code": resp.status_code}


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
        markup = notification.data.get("telegram_markup") if isinstance(notification.data, dict) else None
        sent, passing, permanent = 0, [], []
        for link in links:
            payload: dict[str, Any] = {"chat_id": link.chat_id, "text": message_text(notification),
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
