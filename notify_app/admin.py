from __future__ import annotations

from django.contrib import admin

from notify_app.models import Delivery, Notification, Preference, PushSubscription


class DeliveryInline(admin.TabularInline):
    model = Delivery
    extra = 0
    readonly_fields = ("channel", "status", "attempts", "last_error", "created_at", "sent_at")


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("created_at", "user", "kind", "title")
    list_filter = ("kind",)
    search_fields = ("title", "body", "user__username")
    inlines = [DeliveryInline]


@admin.register(Preference)
class PreferenceAdmin(admin.ModelAdmin):
    list_display = ("user", "kind", "channel", "enabled")
    list_filter = ("kind", "channel", "enabled")


@admin.register(PushSubscription)
class PushSubscriptionAdmin(admin.ModelAdmin):
    list_display = ("user", "endpoint", "created_at", "last_success_at")
    readonly_fields = ("endpoint", "p256dh", "auth", "user_agent", "created_at", "last_success_at")
