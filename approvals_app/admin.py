from __future__ import annotations

from django.contrib import admin

from approvals_app.models import Approval, AuditEntry, SessionGrant, ToolRule
from profiles_app.admin import AgentProfileAdmin
from profiles_app.models import AgentProfile


class ToolRuleInline(admin.TabularInline):
    """A profile's approval rules on its own admin page (they are also listed on their own)."""

    model = ToolRule
    extra = 0
    fields = ("tool", "action", "decision", "allow_patterns", "notes")
    verbose_name_plural = "tool approval rules (allow / ask / deny; the built-in defaults apply where none matches)"


class AgentProfileWithRulesAdmin(AgentProfileAdmin):
    inlines = [*AgentProfileAdmin.inlines, ToolRuleInline]


admin.site.unregister(AgentProfile)
admin.site.register(AgentProfile, AgentProfileWithRulesAdmin)


@admin.register(ToolRule)
class ToolRuleAdmin(admin.ModelAdmin):
    list_display = ("tool", "action", "decision", "profile", "allow_patterns", "updated_at")
    list_filter = ("decision", "profile", "tool")
    search_fields = ("tool", "action", "notes")
    fields = ("profile", "tool", "action", "decision", "allow_patterns", "notes")


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = ("tool", "status", "scope", "user", "session", "origin", "created_at", "decided_by", "decided_at")
    list_filter = ("status", "origin", "tool", "created_at")
    search_fields = ("id", "tool", "reason", "user__username", "session__id")
    raw_id_fields = ("session", "user", "decided_by")
    readonly_fields = [f.name for f in Approval._meta.fields]


@admin.register(SessionGrant)
class SessionGrantAdmin(admin.ModelAdmin):
    list_display = ("tool", "session", "created_by", "created_at")
    search_fields = ("tool", "session__id")
    raw_id_fields = ("session", "approval", "created_by")


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "tool", "decision", "user", "decided_by", "origin", "ran", "success", "session_id")
    list_filter = ("decision", "origin", "ran", "tool", "created_at")
    search_fields = ("tool", "reason", "result_excerpt", "user__username", "session_id")
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in AuditEntry._meta.fields]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False
