from __future__ import annotations

from django.contrib import admin

from recall_app.models import Recall, RecallRun


class RecallRunInline(admin.TabularInline):
    model = RecallRun
    extra = 0
    can_delete = False
    fields = ("due_at", "started_at", "finished_at", "outcome", "error", "first_message_seq", "last_message_seq",
              "worker")
    readonly_fields = fields
    ordering = ("-started_at",)

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Recall)
class RecallAdmin(admin.ModelAdmin):
    list_display = ("id", "session", "call_type", "status", "trigger_at", "interval_seconds", "fire_count",
                    "last_fired_at", "created_at")
    list_filter = ("status", "call_type", "created_at")
    search_fields = ("id", "session__id", "session__title", "session__owner__username", "internal_comment",
                     "additional_context_message")
    readonly_fields = ("id", "claim_token", "claimed_by", "claimed_until", "fire_count", "last_fired_at",
                       "created_at", "updated_at")
    raw_id_fields = ("session",)
    date_hierarchy = "trigger_at"
    inlines = [RecallRunInline]


@admin.register(RecallRun)
class RecallRunAdmin(admin.ModelAdmin):
    list_display = ("recall", "due_at", "started_at", "finished_at", "outcome", "worker")
    list_filter = ("outcome",)
    search_fields = ("recall__id", "error", "worker")
    raw_id_fields = ("recall",)
