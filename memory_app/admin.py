"""Admin: superusers see everyone's memory, other staff only their own."""
from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from memory_app import services
from memory_app.models import MemoryFact, MemoryFactChange, MemorySummary, SessionMemoryState


class OwnRowsMixin:
    """Restrict the changelist and every object lookup to the staff member's own rows."""

    owner_field = "user"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        qs = super().get_queryset(request)  # type: ignore[misc]
        if request.user.is_superuser:
            return qs
        return qs.filter(**{f"{self.owner_field}_id": request.user.pk})

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "user" and not request.user.is_superuser:
            from django.contrib.auth import get_user_model

            kwargs["queryset"] = get_user_model().objects.filter(pk=request.user.pk)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]


class MemoryFactChangeInline(admin.TabularInline):
    model = MemoryFactChange
    extra = 0
    can_delete = False
    fields = ("created_at", "reason", "old_value", "new_value", "session")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(MemoryFact)
class MemoryFactAdmin(OwnRowsMixin, admin.ModelAdmin):
    list_display = ("key", "category", "value", "user", "confidence", "updated_at", "expires_at")
    list_filter = ("category", "user", "updated_at")
    search_fields = ("key", "value", "category")
    readonly_fields = ("source_session", "source_message", "created_at", "updated_at")
    raw_id_fields = ("source_session", "source_message")
    inlines = [MemoryFactChangeInline]
    ordering = ("-updated_at",)

    def get_list_filter(self, request: HttpRequest) -> Any:
        return self.list_filter if request.user.is_superuser else ("category", "updated_at")

    def save_model(self, request: HttpRequest, obj: MemoryFact, form: Any, change: bool) -> None:
        if change and "value" in form.changed_data:
            old = MemoryFact.objects.get(pk=obj.pk)
            MemoryFactChange.objects.create(fact=obj, old_value=old.value, new_value=obj.value,
                                            reason=MemoryFactChange.Reason.USER_EDIT)
        super().save_model(request, obj, form, change)
        services.summary_rebuild_later(user_id=obj.user_id)

    def delete_model(self, request: HttpRequest, obj: MemoryFact) -> None:
        services.fact_delete(fact=obj)
        services.summary_rebuild_later(user_id=obj.user_id)


@admin.register(MemorySummary)
class MemorySummaryAdmin(OwnRowsMixin, admin.ModelAdmin):
    list_display = ("user", "updated_at", "stale")
    fields = ("user", "text", "updated_at", "stale", "facts_version")
    readonly_fields = ("updated_at", "stale", "facts_version")


@admin.register(SessionMemoryState)
class SessionMemoryStateAdmin(OwnRowsMixin, admin.ModelAdmin):
    owner_field = "session__owner"
    list_display = ("session", "extracted_up_to_seq", "extracted_at", "attempts", "attempted_at")
    list_filter = ("attempts",)
    readonly_fields = ("session", "extracted_up_to_seq", "extracted_at", "attempts", "last_error", "attempted_at",
                       "claim_token", "claimed_until")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
