"""Admin: per-tool switches, plus a read-only view of the live registry on the same page."""
from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from tools_app.models import ToolConfig


def _registry_overview() -> dict[str, Any]:
    """Tools, user-tool load errors and MCP servers as the running process sees them."""
    from tools_app.registry import get_registry

    registry = get_registry()
    return {
        "registry_tools": registry.all(),
        "registry_load_errors": registry.load_errors,
        "registry_mcp_servers": registry.mcp.statuses(),
        "registry_mcp_errors": registry.mcp.config_errors,
        "registry_tools_dir": registry.tools_dir,
        "registry_mcp_file": registry.mcp_file,
    }


@admin.register(ToolConfig)
class ToolConfigAdmin(admin.ModelAdmin):
    list_display = ("name", "enabled_globally", "allow_for_non_staff", "notes", "updated_at")
    list_editable = ("enabled_globally", "allow_for_non_staff")
    list_filter = ("enabled_globally", "allow_for_non_staff")
    search_fields = ("name", "notes")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        context = {**(extra_context or {}), **_registry_overview()}
        return super().changelist_view(request, extra_context=context)
