from __future__ import annotations

from django.apps import AppConfig


class NotifyAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "notify_app"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from notify_app import sources
        from notify_app.channels import email, register, webpush

        register(email.EmailChannel())
        register(webpush.WebPushChannel())
        sources.connect()
