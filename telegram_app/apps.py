from __future__ import annotations

from django.apps import AppConfig


class TelegramAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "telegram_app"
    verbose_name = "Telegram"

    def ready(self) -> None:
        from approvals_app.signals import approval_resolved
        from notify_app.api import add_settings_section
        from notify_app.channels import register
        from telegram_app import approvals
        from telegram_app.api import settings_section
        from telegram_app.channel import TelegramChannel

        register(TelegramChannel())
        add_settings_section(settings_section)
        approval_resolved.connect(approvals.on_resolved, dispatch_uid="telegram_app.approval_resolved")
