"""Admin: skill proposals, and below their list the skills on disk with their versions and a
one-click rollback (skills are folders, not rows, so they have no change form of their own)."""
from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from navi_site.errors import NaviError
from skills_app.models import SkillProposal
from skills_app.services import skill_rollback
from skills_app.store import get_store


def _skills_overview() -> dict[str, Any]:
    from profiles_app.models import AgentProfile

    store = get_store()
    scan = store.scan()
    profiles = list(AgentProfile.objects.values_list("id", "enabled_skills"))
    rows = []
    for name, skill in scan.skills.items():
        rows.append({
            "name": name, "source": skill.source, "description": skill.description,
            "current": store.current_version(name), "versions": list(reversed(store.versions(name))),
            "profiles": [pid for pid, names in profiles if name in (names or []) or "*" in (names or [])],
        })
    for name, versions in store.removed(scan):  # its versions are kept: one rollback brings it back
        rows.append({"name": name, "source": "removed (versions kept)", "description": "", "current": None,
                     "versions": list(reversed(versions)), "profiles": []})
    return {"skills_rows": rows, "skills_broken": scan.broken, "skills_dir": store.root}


@admin.register(SkillProposal)
class SkillProposalAdmin(admin.ModelAdmin):
    list_display = ("name", "status", "owner", "profile_id", "version", "created_at", "decided_at")
    list_filter = ("status", "profile_id")
    search_fields = ("name", "description", "content", "note")
    readonly_fields = ("owner", "session", "profile_id", "name", "description", "content", "note", "updates",
                       "status", "after_seq", "version", "decided_by", "decided_at", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # proposals come from the agent; skills are installed on the skills page

    def get_urls(self) -> list[Any]:
        return [path("rollback/", self.admin_site.admin_view(require_POST(self.rollback_view)),
                     name="skills_app_skill_rollback"), *super().get_urls()]

    def rollback_view(self, request: HttpRequest) -> HttpResponse:
        name = request.POST.get("name", "")
        try:
            version = skill_rollback(user=request.user, name=name, version=int(request.POST.get("version", "0")))
            messages.success(request, f"{name} is back to that version (saved as version {version.number}).")
        except (NaviError, ValueError) as exc:
            messages.error(request, getattr(exc, "message", None) or f"Invalid version: {exc}")
        return HttpResponseRedirect(reverse("admin:skills_app_skillproposal_changelist"))

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        context = {**(extra_context or {}), **_skills_overview()}
        return super().changelist_view(request, extra_context=context)
