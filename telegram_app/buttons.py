"""Inline buttons under the bot's messages. Callback data is ``<action>:<id>``; nothing else is
accepted (Telegram lets anyone craft callback data, so every press is checked against the link)."""
from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)

UNKNOWN = "This button is no longer valid."


async def handle(query: Any, link: Any) -> None:
    action, _, ident = str(query.data or "").partition(":")
    log.info("telegram_button_unknown", action=action[:40], chat_id=link.chat_id)
    await query.answer(UNKNOWN, show_alert=True)
