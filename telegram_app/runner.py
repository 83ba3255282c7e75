"""Where the bot runs. Embedded mode: long polling on the server's own event loop (turns then run
where a browser tab's would, beside the in-memory channel layer). Scale-out: its own process
(``manage.py telegram_bot``), exactly one, independent of Celery; its turns run in that process
and reach the browsers through Redis like any ASGI process's."""
from __future__ import annotations

import asyncio
from typing import Any

import structlog
from django.conf import settings

log = structlog.get_logger(__name__)


def enabled() -> bool:
    return bool(getattr(settings, "TELEGRAM_BOT_TOKEN", ""))


async def run_safely(app: Any) -> bool:
    """Start polling; a refused token or an unreachable API is logged, and Navi runs on without the bot."""
    from telegram.error import InvalidToken, TelegramError

    from telegram_app.bot import start_polling

    try:
        await start_polling(app)
        return True
    except InvalidToken:
        log.error("telegram_bot_not_started", reason="Telegram refused TELEGRAM_BOT_TOKEN: copy the token "
                  "@BotFather gave you (123456:ABC...) into TELEGRAM_BOT_TOKEN.")
    except (TelegramError, OSError) as exc:
        log.error("telegram_bot_not_started", reason=f"{type(exc).__name__}: {exc}",
                  api=settings.TELEGRAM_API_URL)
    return False


def start_in_server(loop: asyncio.AbstractEventLoop, reactor: Any) -> None:
    """Embedded mode: poll on the server's loop; stop before the reactor shuts down."""
    from twisted.internet import defer

    from telegram_app.bot import build_application, stop_polling

    app = build_application()
    started = loop.create_task(run_safely(app))

    async def stop() -> None:
        if await started:
            await stop_polling(app)

    reactor.addSystemEventTrigger("before", "shutdown",
                                  lambda: defer.Deferred.fromFuture(asyncio.ensure_future(stop())))


async def run_process(stop: asyncio.Event) -> int:
    """Scale-out: poll until ``stop`` is set. Returns an exit status."""
    from telegram_app.bot import build_application, stop_polling

    app = build_application()
    if not await run_safely(app):
        return 1
    try:
        await stop.wait()
    finally:
        await stop_polling(app)
    return 0
