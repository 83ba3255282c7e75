"""REST: /agents/profiles and /agents/tools."""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from profiles_app.models import AgentProfile

router = Router(tags=["agents"])


@router.get("/profiles", summary="List the available profiles")
def list_profiles(request: HttpRequest) -> list[dict[str, Any]]:
    return [
        {
            "id": p.id,
            "name": p.name,
            "model": p.model or None,
            "llm_backend": p.llm_backend,
            "temperature": p.temperature,
            "max_iterations": p.max_iterations,
            "planning_enabled": p.planning_enabled,
            "enabled_tools": p.enabled_tools,
            "scratchpad_sections": p.scratchpad_sections,
        }
        for p in AgentProfile.objects.filter(is_active=True).order_by("id")
    ]


@router.get("/tools", summary="List every registered tool (builtin, user, MCP) with its status")
def list_tools(request: HttpRequest) -> list[dict[str, Any]]:
    try:
        from tools_app.registry import get_registry
    except ImportError:  # the tools app is not installed yet
        return []
    return [dict(item) for item in get_registry().describe()]
