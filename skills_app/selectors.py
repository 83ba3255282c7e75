"""Reads of the skills app: the store's skills with their profiles and versions, and proposals."""
from __future__ import annotations

from typing import Any

from profiles_app.models import AgentProfile
from skills_app.format import SKILL_FILE, SkillFormatError, decode_text, parse_skill
from skills_app.models import SkillProposal
from skills_app.services import proposal_to_dict
from skills_app.store import BrokenSkill, Skill, SkillNotFound, get_store
from skills_app.tree import read_folder, write_archive


def _profiles() -> list[dict[str, Any]]:
    return [{"id": p.id, "name": p.name, "enabled_skills": list(p.enabled_skills or []),
             "has_skill_view": "skill_view" in (p.enabled_tools or [])}
            for p in AgentProfile.objects.filter(is_active=True).order_by("id")]


def _enabled_in(name: str, profiles: list[dict[str, Any]]) -> list[str]:
    return [p["id"] for p in profiles if name in p["enabled_skills"] or "*" in p["enabled_skills"]]


def _skill_row(skill: Skill, profiles: list[dict[str, Any]]) -> dict[str, Any]:
    doc = skill.doc
    return {
        "name": skill.name, "description": doc.description, "source": skill.source,
        "replaces_bundled": skill.replaces_bundled, "license": doc.license, "compatibility": doc.compatibility,
        "metadata": doc.metadata, "allowed_tools": list(doc.allowed_tools), "warnings": list(doc.warnings),
        "files": list(skill.files), "enabled_in": _enabled_in(skill.name, profiles),
    }


def _broken_row(broken: BrokenSkill) -> dict[str, Any]:
    return {"folder": broken.folder, "source": broken.source, "path": str(broken.path), "error": broken.error}


def _description_of(name: str, number: int) -> str:
    try:
        files = get_store().version_files(name, number)
        return parse_skill(decode_text(files.get(SKILL_FILE, b""), what=SKILL_FILE)).description
    except (SkillNotFound, SkillFormatError):
        return ""


def removed_skills(scan: Any = None) -> list[dict[str, Any]]:
    """Skills removed whose versions are kept: name, how many versions, the latest one and its description."""
    return [{"name": name, "versions": len(versions), "latest": versions[-1].number,
             "description": _description_of(name, versions[-1].number)}
            for name, versions in get_store().removed(scan)]


def skill_overview(*, user: Any) -> dict[str, Any]:
    scan = get_store().scan()
    profiles = _profiles()
    return {
        "skills": [_skill_row(s, profiles) for s in scan.skills.values()],
        "broken": [_broken_row(b) for b in scan.broken],
        "removed": removed_skills(scan),
        "profiles": profiles,
        "can_manage": bool(getattr(user, "is_staff", False)),
        "skills_dir": str(get_store().root),
    }


def skill_detail(*, name: str) -> dict[str, Any]:
    store = get_store()
    skill = store.get(name)
    return {
        **_skill_row(skill, _profiles()),
        "body": skill.doc.body,
        "content": store.read_file(name, SKILL_FILE),
        "versions": [v.to_dict() for v in reversed(store.versions(name))],
        "current_version": store.current_version(name),
    }


def version_detail(*, name: str, number: int) -> dict[str, Any]:
    store = get_store()
    files = store.version_files(name, number)
    text = decode_text(files.get(SKILL_FILE, b""), what=SKILL_FILE)
    try:
        body = parse_skill(text).body
    except SkillFormatError:
        body = text
    meta = next((v.to_dict() for v in store.versions(name) if v.number == number), {"number": number})
    return {**meta, "name": name, "content": text, "body": body, "files": sorted(p for p in files if p != SKILL_FILE)}


def skill_export(*, name: str) -> bytes:
    store = get_store()
    skill = store.get(name)
    return write_archive(skill.name, read_folder(skill.path))


def proposals_for_session(*, user: Any, session_id: str) -> list[dict[str, Any]]:
    rows = (SkillProposal.objects.select_related("decided_by")
            .filter(owner_id=user.pk, session_id=_uuid_or_none(session_id))
            .exclude(status__in=(SkillProposal.Status.DRAFT, SkillProposal.Status.DROPPED)))
    return [proposal_to_dict(p) for p in rows]


def _uuid_or_none(value: str) -> Any:
    import uuid

    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


__all__ = ["SkillNotFound", "proposals_for_session", "removed_skills", "skill_detail", "skill_export", "skill_overview",
           "version_detail"]
