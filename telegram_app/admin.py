from __future__ import annotations

from django.contrib import admin

from telegram_app.models import TelegramLink


@admin.register(TelegramLink)
class TelegramLinkAdmin(admin.ModelAdmin):
    list_display = ("user", "chat_title", "chat_id", "linked_at")
    readonly_fields = ("chat_id", "linked_at")
