"""The Telegram bot: chatting with Navi from a linked private chat.

Built on python-telegram-bot (its ``Application`` for long polling and handler dispatch, its
``Bot`` over httpx). Every update passes ``_gate`` first: only private chats, only linked ones,
only active users; anyone else gets a reply saying how to link and no access. A message is a turn
in the chat's session, started through the run registry like a browser tab's, and streamed back
by ``TurnStreamer``. Updates are handled concurrently, so /stop is read while a turn streams.

Commands: /start, /link CODE, /new, /stop, /unlink, /help. Photos become images of the turn (and
uploads of the session); documents become uploads the turn refers to.
"""
from __future__ import annotations

import base64
from typing import Any

import structlog
from channels.db import database_sync_to_async
from django.conf import settings
from telegram import BotCommand, Update
from telegram.constants import ChatAction, ChatType
from telegram.error import TelegramError
from telegram.ext import Application, CallbackQueryHandler, CommandHandler, ContextTypes, MessageHandler, filters

from telegram_app import incoming, services
from telegram_app.render import split_text
from telegram_app.stream import TurnStreamer, call_with_flood_wait

log = structlog.get_logger(__name__)

TELEGRAM_DOWNLOAD_LIMIT = 20 * 1024 * 1024  # the Bot API serves files up to 20 MB to bots
MAX_IMAGE_BYTES = 10 * 1024 * 1024

HELP = ("Talk to Navi here: every message is a turn in this chat's conversation.\n"
        "/new — start a new conversation\n/stop — stop the answer being written\n"
        "/unlink — disconnect this chat from your Navi account\n"
        "Photos and files you send become uploads Navi can read.")
NOT_LINKED = ("This chat is not linked to a Navi account, so Navi does not answer here. In Navi open "
              "Notifications → Telegram → Link a Telegram chat, then send /link CODE here.")
PRIVATE_ONLY = "Navi only talks in private chats: message this bot directly."
UNSUPPORTED = "Navi reads text, photos and files; this kind of message cannot be passed on."

COMMANDS = [BotCommand("new", "Start a new conversation"), BotCommand("stop", "Stop the answer being written"),
            BotCommand("link", "Link this chat with a code from Navi"), BotCommand("unlink", "Unlink this chat"),
            BotCommand("help", "What the bot can do")]


def _api_urls() -> tuple[str, str]:
    base = settings.TELEGRAM_API_URL.rstrip("/")
    return f"{base}/bot", f"{base}/file/bot"


def build_application() -> Application:  # type: ignore[type-arg]
    base_url, file_url = _api_urls()
    poll = float(settings.TELEGRAM_POLL_TIMEOUT)
    app = (Application.builder().token(settings.TELEGRAM_BOT_TOKEN).base_url(base_url).base_file_url(file_url)
           .concurrent_updates(True).get_updates_read_timeout(poll + 10).connect_timeout(10).read_timeout(20)
           .write_timeout(30).build())
    bot = NaviBot()
    app.add_handler(CommandHandler("start", bot.start))
    app.add_handler(CommandHandler("help", bot.help))
    app.add_handler(CommandHandler("link", bot.link))
    app.add_handler(CommandHandler("unlink", bot.unlink))
    app.add_handler(CommandHandler("new", bot.new))
    app.add_handler(CommandHandler("stop", bot.stop))
    app.add_handler(MessageHandler(filters.COMMAND, bot.help))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, bot.text))
    app.add_handler(MessageHandler(filters.PHOTO | filters.Document.ALL, bot.upload))
    app.add_handler(CallbackQueryHandler(bot.button))
    app.add_handler(MessageHandler(filters.ALL, bot.unsupported))
    app.add_error_handler(bot.on_error)
    return app


async def reply(update: Update, text: str) -> None:
    """Answer in the update's chat, split at Telegram's limit."""
    chat = update.effective_chat
    if chat is None:
        return
    for page in split_text(text):
        await call_with_flood_wait(chat.get_bot().send_message, chat_id=chat.id, text=page)


class NaviBot:
    async def _gate(self, update: Update) -> Any | None:
        """The chat's link, or None after telling the chat why it gets no access."""
        chat = update.effective_chat
        if chat is None:
            return None
        if chat.type != ChatType.PRIVATE:
            await reply(update, PRIVATE_ONLY)
            return None
        link = await database_sync_to_async(services.link_for_chat)(chat_id=chat.id)
        if link is None:
            await reply(update, NOT_LINKED)
        return link

    async def start(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if context.args:  # t.me/<bot>?start=CODE
            await self.link(update, context)
            return
        chat = update.effective_chat
        link = await database_sync_to_async(services.link_for_chat)(chat_id=chat.id) if chat else None
        if link is None:
            await reply(update, "Hello! " + NOT_LINKED)
            return
        await reply(update, f"This chat is linked to {link.user.get_username()}'s Navi.\n\n{HELP}")

    async def help(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await reply(update, HELP)

    async def link(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        chat = update.effective_chat
        if chat is None:
            return
        if chat.type != ChatType.PRIVATE:
            await reply(update, PRIVATE_ONLY)
            return
        code = " ".join(context.args or [])
        if not code.strip():
            await reply(update, "Send /link followed by the code Navi shows you (Notifications → Telegram).")
            return
        title = chat.full_name or chat.username or str(chat.id)
        try:
            link = await database_sync_to_async(services.link_consume)(chat_id=chat.id, chat_title=title, code=code)
        except services.LinkRefused as exc:
            await reply(update, exc.reply)
            return
        username = await database_sync_to_async(lambda: link.user.get_username())()
        await reply(update, f"Linked: this chat now talks to {username}'s Navi, and your notifications arrive "
                            f"here.\n\n{HELP}")

    async def unlink(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        chat = update.effective_chat
        if chat is None:
            return
        gone = await database_sync_to_async(services.unlink_chat)(chat_id=chat.id)
        await reply(update, "This chat is no longer linked to Navi." if gone else NOT_LINKED)

    async def new(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        link = await self._gate(update)
        if link is None:
            return
        await database_sync_to_async(services.chat_session)(link=link, new=True)
        await reply(update, "New conversation started: your next message begins it.")

    async def stop(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        from sessions_app.runs import arequest_stop

        link = await self._gate(update)
        if link is None:
            return
        if link.session_id is None or not await arequest_stop(str(link.session_id)):
            await reply(update, "Nothing is running.")
            return
        await reply(update, "Stopping…")

    async def text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        link = await self._gate(update)
        if link is None or update.message is None:
            return
        message = update.message
        await self._turn(update, link, incoming.turn_text(message, message.text or ""),
                         tainted_by=incoming.taint_of(message))

    async def upload(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        link = await self._gate(update)
        message = update.message
        if link is None or message is None:
            return
        session = await database_sync_to_async(services.chat_session)(link=link)
        if message.photo:
            item: Any = message.photo[-1]  # the largest size
            name, content_type, limit = f"photo-{message.message_id}.jpg", "image/jpeg", MAX_IMAGE_BYTES
        else:
            item = message.document
            name = item.file_name or f"file-{message.message_id}"
            content_type, limit = item.mime_type or "", _upload_limit()
        if item.file_size and item.file_size > limit:
            await reply(update, f"That file is {item.file_size / 1e6:.1f} MB: the limit here is {limit / 1e6:.0f} MB. "
                                "Send a smaller one, or upload it in Navi's web page.")
            return
        data = bytes(await (await item.get_file()).download_as_bytearray())
        from navi_site.errors import NaviError
        from sessions_app.files import file_store_bytes

        try:
            stored = await database_sync_to_async(file_store_bytes)(session=session, name=name, data=data,
                                                                    content_type=content_type)
        except NaviError as exc:
            await reply(update, exc.message)
            return
        caption = (message.caption or "").strip()
        taint = incoming.taint_of(message)
        if message.photo:
            await self._turn(update, link, incoming.turn_text(message, caption or "Here is a photo."),
                             images=(base64.b64encode(data).decode(),), tainted_by=taint)
        else:
            await self._turn(update, link, incoming.turn_text(message, caption or f"I sent you a file: "
                                                                                  f"{stored.original_name}"),
                             files=({"name": stored.original_name, "path": stored.stored_path},), tainted_by=taint)

    async def unsupported(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if await self._gate(update) is not None:
            await reply(update, UNSUPPORTED)

    async def button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Inline buttons (approvals): answered by ``telegram_app.approvals`` when it is installed."""
        query = update.callback_query
        if query is None:
            return
        link = await database_sync_to_async(services.link_for_chat)(chat_id=query.message.chat.id) \
            if query.message is not None else None
        if link is None:
            await query.answer(NOT_LINKED[:190], show_alert=True)
            return
        from telegram_app import buttons

        await buttons.handle(query, link)

    async def _turn(self, update: Update, link: Any, text: str, *, images: tuple[str, ...] = (),
                    files: tuple[dict[str, Any], ...] = (), tainted_by: tuple[str, ...] = ()) -> None:
        """A turn in the chat's session. ``tainted_by``: untrusted content the message brought in
        (``incoming.taint_of``): the exfiltration guard asks before outward calls and says why."""
        from sessions_app.runs import SessionBusy, TurnRequest, get_run_registry

        chat = update.effective_chat
        assert chat is not None
        session = await database_sync_to_async(services.chat_session)(link=link)
        sid = str(session.id)
        registry = get_run_registry()
        snap = await registry.snapshot(sid)
        after = snap.events[-1]["seq"] if snap.events else snap.last_seq
        role = "staff" if link.user.is_staff else "user"
        try:
            run = await registry.start_turn(TurnRequest(session_id=sid, text=text[:100_000], user_id=link.user_id,
                                                  user_role=role, images=images, files=files,
                                                  tainted_by=tainted_by))
        except SessionBusy as exc:
            await reply(update, f"{exc.message[0].upper()}{exc.message[1:]} (/stop).")
            return
        try:
            await chat.send_action(ChatAction.TYPING)
        except TelegramError:
            pass
        streamer = TurnStreamer(chat.get_bot(), chat.id, sid, edit_interval=float(settings.TELEGRAM_EDIT_INTERVAL_SECONDS))
        await streamer.run(after=after, done=run.done)

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("telegram_handler_failed", error=repr(context.error), exc_info=context.error)
        if isinstance(update, Update) and update.effective_chat is not None:
            try:
                await reply(update, "Something went wrong on Navi's side; the server log has the details.")
            except TelegramError:
                pass


def _upload_limit() -> int:
    return min(TELEGRAM_DOWNLOAD_LIMIT, int(settings.SESSION_FILES_MAX_SIZE_MB) * 1024 * 1024)


async def start_polling(app: Application) -> None:  # type: ignore[type-arg]
    """Start the bot on the running loop (the embedded server's, or the bot process's own)."""
    await app.initialize()
    try:
        await app.bot.set_my_commands(COMMANDS)
    except TelegramError as exc:
        log.warning("telegram_commands_not_set", error=str(exc))
    await app.start()
    assert app.updater is not None
    await app.updater.start_polling(timeout=int(settings.TELEGRAM_POLL_TIMEOUT), poll_interval=0.0,
                                    allowed_updates=["message", "callback_query"], drop_pending_updates=False)
    log.info("telegram_bot_polling", bot=app.bot.username)


async def stop_polling(app: Application) -> None:  # type: ignore[type-arg]
    if app.updater is not None and app.updater.running:
        await app.updater.stop()
    if app.running:
        await app.stop()
    await app.shutdown()
