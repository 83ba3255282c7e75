"""Streaming a turn into a Telegram chat: the bot is one more client of the run registry.

The streamer reads the turn's events from the registry's log (``tail(after=seq)``, every
POLL_S; the same log a reconnecting tab replays, so it works in both tiers and whichever process
runs the turn) and shows them by editing its message, at most once per
TELEGRAM_EDIT_INTERVAL_SECONDS (Telegram limits edits; a faster model simply makes each edit
carry more text). A 429 answer waits its ``retry_after`` and then sends the newest text, never
the backlog. A reply longer than a message continues in a new one. While it streams, the chat
counts as a visible watcher of the session (``sessions_app.presence``).
"""
from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import structlog
from telegram.error import BadRequest, RetryAfter, TelegramError

from telegram_app.render import TurnView

log = structlog.get_logger(__name__)

POLL_S = 0.25


def retry_seconds(exc: RetryAfter) -> float:
    value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


async def call_with_flood_wait(fn: Any, *args: Any, max_waits: int = 5, **kwargs: Any) -> Any:
    """Call a Bot API method; on 429 wait ``retry_after`` and try again (at most ``max_waits`` times)."""
    for attempt in range(max_waits + 1):
        try:
            return await fn(*args, **kwargs)
        except RetryAfter as exc:
            if attempt == max_waits:
                raise
            wait = retry_seconds(exc)
            log.info("telegram_flood_wait", method=getattr(fn, "__name__", "?"), seconds=wait)
            await asyncio.sleep(wait)
    return None


class TurnStreamer:
    def __init__(self, bot: Any, chat_id: int, session_id: str, *, edit_interval: float) -> None:
        self.bot = bot
        self.chat_id = chat_id
        self.session_id = session_id
        self.edit_interval = edit_interval
        self.view = TurnView()
        self.message_ids: list[int] = []  # one per page
        self.shown: list[str] = []  # the text each message shows now
        self.next_edit_at = 0.0  # pacing: TELEGRAM_EDIT_INTERVAL_SECONDS after the last edit
        self.blocked_until = 0.0  # a 429's retry_after: no call before this, final or not

    async def run(self, *, after: int, done: asyncio.Future[Any], timeout: float = 3600.0) -> TurnView:
        """Follow the turn whose events come after seq ``after``; ``done`` is the run's result
        (``Run.done``: the bot starts its turns in its own process). The log shows the turn as it
        happens; the result settles how it ended even when a following turn (an immediate recall)
        replaced the log before the last events were read."""
        from sessions_app import presence
        from sessions_app.runs import get_run_registry

        registry = get_run_registry()
        client = f"telegram:{self.chat_id}"
        await presence.aset(self.session_id, client, visible=True)
        deadline = time.monotonic() + timeout
        reading = True
        try:
            while time.monotonic() < deadline:
                finished = done.done()  # read before the log: every event is logged before the result
                if reading:
                    tail = await registry.tail(self.session_id, after)
                    for event in tail.events:
                        seq = int(event.get("seq") or 0)
                        if seq != after + 1:  # a later turn's log: ours is over
                            reading = False
                            break
                        after = seq
                        self.view.apply(event)
                        if event.get("type") == "approval_required":
                            await self.show(final=True)  # the reply so far, then the card below it
                            await self.card(event)
                        if self.view.done:
                            reading = False
                            break
                if finished:
                    self.view.finish(done.result())
                    break
                await self.show()
                await asyncio.sleep(POLL_S)
            for _ in range(10):  # the last text must arrive, after any flood wait
                if await self.show(final=True):
                    break
                await asyncio.sleep(max(0.05, self.blocked_until - time.monotonic()))
        finally:
            await presence.aleave(self.session_id, client)
        return self.view

    async def card(self, event: dict[str, Any]) -> None:
        """The turn's approval card: a message of its own with the buttons (``telegram_app.approvals``)."""
        from channels.db import database_sync_to_async
        from telegram import InlineKeyboardMarkup

        from telegram_app import approvals

        approval_id = str(event.get("approval_id") or "")
        text = approvals.card_text(tool=str(event.get("tool") or "a tool"), reason=str(event.get("reason") or ""),
                                   touches=str(event.get("touches") or ""), tainted_by=event.get("tainted_by") or (),
                                   expires_at=event.get("expires_at"), is_subagent=bool(event.get("is_subagent")))
        markup = InlineKeyboardMarkup.de_json(approvals.keyboard(approval_id), self.bot)
        try:
            message = await call_with_flood_wait(self.bot.send_message, chat_id=self.chat_id, text=text,
                                                 reply_markup=markup)
        except TelegramError as exc:
            log.warning("telegram_approval_card_not_sent", chat_id=self.chat_id, error=str(exc))
            return
        await database_sync_to_async(approvals.record)(approval_id=approval_id, chat_id=self.chat_id,
                                                       message_id=message.message_id, text=text)

    async def show(self, *, final: bool = False) -> bool:
        """Bring the chat up to date with the view, within the edit rate (``final``: now, unless a
        429 asked to wait). True when the chat shows the view."""
        pages = self.view.pages()
        if pages == self.shown:
            return True
        now = time.monotonic()
        if now < self.blocked_until or (not final and now < self.next_edit_at and len(pages) == len(self.shown)):
            return False
        for index, text in enumerate(pages):
            if index < len(self.shown) and self.shown[index] == text:
                continue
            if index < len(self.message_ids):
                if not await self._edit(self.message_ids[index], text):
                    return False
            else:
                message = await call_with_flood_wait(self.bot.send_message, chat_id=self.chat_id, text=text)
                self.message_ids.append(message.message_id)
            if index < len(self.shown):
                self.shown[index] = text
            else:
                self.shown.append(text)
        self.next_edit_at = time.monotonic() + self.edit_interval
        return True

    async def _edit(self, message_id: int, text: str) -> bool:
        """Edit one message; False when Telegram said to wait (429: the newest text goes later)."""
        try:
            await self.bot.edit_message_text(chat_id=self.chat_id, message_id=message_id, text=text)
        except RetryAfter as exc:
            self.blocked_until = time.monotonic() + retry_seconds(exc)
            log.info("telegram_flood_wait", chat_id=self.chat_id, seconds=retry_seconds(exc))
            return False
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                log.warning("telegram_edit_refused", chat_id=self.chat_id, error=str(exc))
        except TelegramError as exc:  # a network hiccup: try again in a second with the newest text
            log.warning("telegram_edit_failed", chat_id=self.chat_id, error=str(exc))
            self.blocked_until = time.monotonic() + 1.0
            return False
        return True
