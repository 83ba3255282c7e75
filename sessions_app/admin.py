from django.contrib import admin, messages
from django.utils import timezone

from sessions_app.models import ApiToken, Message, Session


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    can_delete = False
    fields = ("seq", "buffer", "role", "content", "name", "is_plan", "is_summary", "is_recall", "interrupted", "created_at")
    readonly_fields = fields
    ordering = ("-seq",)
    show_change_link = True

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def get_queryset(self, request):  # type: ignore[no-untyped-def]
        return super().get_queryset(request).order_by("-seq")


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "owner", "profile", "pinned", "last_active", "context_token_count")
    list_filter = ("profile", "pinned")
    search_fields = ("id", "title", "owner__username")
    date_hierarchy = "last_active"
    raw_id_fields = ("owner",)
    readonly_fields = ("created_at", "next_seq", "context_token_count")
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("session", "seq", "role", "buffer", "short_content", "is_plan", "is_summary", "is_recall", "created_at")
    list_filter = ("role", "buffer", "is_plan", "is_summary", "is_recall", "interrupted")
    search_fields = ("content", "session__id", "session__title")
    raw_id_fields = ("session",)
    list_select_related = ("session",)

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return (obj.content or "")[:80]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at")
    actions = ["revoke"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False  # tokens are issued with `manage.py create_api_token`, which shows the raw value once

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):  # type: ignore[no-untyped-def]
        n = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {n} token(s).", messages.SUCCESS)
