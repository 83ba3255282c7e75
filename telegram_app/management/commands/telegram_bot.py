"""`python manage.py telegram_bot`: the Telegram bot as its own process (scale-out mode; exactly one)."""
from __future__ import annotations

import asyncio
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Run the Telegram bot (scale-out mode; in embedded mode `manage.py start` runs it)."

    def handle(self, *args, **opts):  # type: ignore[no-untyped-def]
        if not settings.TELEGRAM_BOT_TOKEN:
            raise CommandError("TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and put its token there.")
        if settings.NAVI_MODE == "embedded":
            raise CommandError("In embedded mode the bot runs inside `manage.py start`. This command is for "
                               "scale-out mode (REDIS_URL and a PostgreSQL DATABASE_URL set).")
        from telegram_app.runner import run_process

        async def main() -> int:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            return await run_process(stop)

        self.stdout.write("Navi's Telegram bot is polling — Ctrl-C to stop.")
        status = asyncio.run(main())
        if status:
            raise CommandError("The Telegram bot could not start: see the log above.")
