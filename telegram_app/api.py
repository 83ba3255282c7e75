"""REST for the settings page: a one-time link code, and unlinking a chat. Mounted at /telegram."""
from __future__ import annotations

from typing import Any

import httpx
import structlog
from django.conf import settings
from django.http import HttpRequest
from ninja import Router, Status

from navi_site.errors import BadRequest
from telegram_app import services

log = structlog.get_logger(__name__)

PREFIX = "/telegram"
router = Router(tags=["telegram"])

_username: dict[str, str] = {}


def bot_name() -> str:
    """``@username`` of the bot (asked once per process), or a plain description if Telegram cannot say."""
    token = settings.TELEGRAM_BOT_TOKEN
    if token not in _username:
        try:
            resp = httpx.get(f"{settings.TELEGRAM_API_URL.rstrip('/')}/bot{token}/getMe", timeout=5.0)
            name = resp.json().get("result", {}).get("username") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            name = None
        if not name:
            return "your Navi bot"
        _username[token] = f"@{name}"
    return _username[token]


def settings_section(user: Any) -> tuple[str, dict[str, Any]]:
    if not settings.TELEGRAM_BOT_TOKEN:
        return "telegram", {"configured": False, "links": [],
                            "detail": "The server has no Telegram bot: the administrator sets TELEGRAM_BOT_TOKEN."}
    links = [{"id": link.pk, "chat_title": link.chat_title or str(link.chat_id), "linked_at": link.linked_at.isoformat()}
             for link in services.links_of(user=user)]
    return "telegram", {"configured": True, "links": links, "detail": ""}


@router.post("/link-code", response={201: dict}, summary="A one-time code to link a Telegram chat (valid 10 minutes)")
def link_code(request: HttpRequest) -> Status:
    if not settings.TELEGRAM_BOT_TOKEN:
        raise BadRequest("This server has no Telegram bot: the administrator sets TELEGRAM_BOT_TOKEN first.")
    code, seconds = services.link_code_create(user=request.user)
    return Status(201, {"code": code, "expires_in": seconds, "bot": bot_name()})


@router.delete("/links/{link_id}", summary="Unlink a Telegram chat")
def unlink(request: HttpRequest, link_id: int) -> dict[str, Any]:
    services.link_revoke(user=request.user, link_id=link_id)
    return {"ok": True}
