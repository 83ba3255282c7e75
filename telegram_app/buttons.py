"""Inline buttons under the bot's messages. Callback data is ``<action>:<id>``; nothing else is
accepted (Telegram lets anyone craft callback data, so every press is checked against the link).
Today's buttons are the approval cards' (``telegram_app.approvals``)."""
from __future__ import annotations

from typing import Any

import structlog
from channels.db import database_sync_to_async
from telegram.error import BadRequest, TelegramError

from telegram_app import approvals

log = structlog.get_logger(__name__)

UNKNOWN = "This button is no longer valid."
ANSWER_LIMIT = 200  # Telegram's limit for a callback answer's text


async def handle(query: Any, link: Any) -> None:
    action, _, ident = str(query.data or "").partition(":")
    if action not in approvals.ACTIONS or not ident:
        log.info("telegram_button_unknown", action=action[:40], chat_id=link.chat_id)
        await query.answer(UNKNOWN, show_alert=True)
        return
    message = query.message
    answer, new_text = await database_sync_to_async(approvals.decide)(
        link=link, action=action, approval_id=ident, chat_id=link.chat_id,
        message_id=message.message_id if message is not None else None)
    log.info("telegram_approval_pressed", action=action, approval_id=ident[:40], chat_id=link.chat_id, answer=answer)
    decided = answer in {told for _, _, told in approvals.ACTIONS.values()}
    await query.answer(answer[:ANSWER_LIMIT], show_alert=not decided)  # a refusal stays until it is read
    if new_text is not None:
        try:
            await query.edit_message_text(new_text, reply_markup=None)
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                log.warning("telegram_approval_card_not_edited", chat_id=link.chat_id, error=str(exc))
        except TelegramError as exc:
            log.warning("telegram_approval_card_not_edited", chat_id=link.chat_id, error=str(exc))
