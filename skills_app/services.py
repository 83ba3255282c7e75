"""Writes of the skills app: proposals (the learning loop), saving, rollback, install, enablement.

The learning loop:
1. During a turn, the agent calls ``skill_write`` with a SKILL.md → ``proposal_create`` keeps it as a
   *draft*, refused unless the turn already made several successful tool calls
   (``SKILLS_PROPOSE_MIN_TOOL_CALLS``) — a skill is distilled from work that was done.
2. When the turn ends, ``proposals_after_turn`` (a sessions hook) shows the draft (*pending*, the
   ``skill_proposal`` event) if the turn ended well with a final answer, else drops it.
3. The user accepts (optionally after editing the Markdown) or discards it. Accepting saves a new
   version of the skill (``SkillStore.save``; the old one is kept) and enables the skill for the
   session's profile.

Every state change publishes ``skill_proposal`` to the session's clients once it commits.
Public services raise ``navi_site.errors`` exceptions with messages a person can act on.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import structlog
from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agent.events import SkillProposalUpdate
from navi_site.errors import BadRequest, Conflict, NaviError, NotFound
from profiles_app.models import AgentProfile
from skills_app.format import SKILL_FILE, SkillFormatError, parse_skill
from skills_app.models import SkillProposal
from skills_app.store import SkillNotFound, Version, get_store
from skills_app.tree import Files, check_tree

log = structlog.get_logger(__name__)

FINAL_MARKERS = ("stopped", "max_iterations")


class PermissionDenied(NaviError):
    status = 403


# ---------------------------------------------------------------------------- permissions


def may_write_skills(user: Any, profile_id: str) -> bool:
    """Whether ``user`` may make skills that change a profile's prompt (the skill_write tool's rule:
    staff, or a profile/tool an administrator opened to every user)."""
    if getattr(user, "is_staff", False):
        return True
    from tools_app.selectors import allows_non_staff

    profile = AgentProfile.objects.filter(pk=profile_id).first()
    return bool(profile and profile.allow_dangerous_tools_for_users) or allows_non_staff("skill_write")


def require_staff(user: Any, action: str) -> None:
    if not getattr(user, "is_staff", False):
        raise PermissionDenied(f"Only staff users may {action}; ask an administrator.")


# ---------------------------------------------------------------------------- proposals


def proposal_to_dict(p: SkillProposal) -> dict[str, Any]:
    return {
        "id": p.pk, "session_id": str(p.session_id), "profile_id": p.profile_id, "name": p.name,
        "description": p.description, "content": p.content, "note": p.note, "updates": p.updates,
        "status": p.status, "version": p.version, "created_at": p.created_at.isoformat(),
        "decided_at": p.decided_at.isoformat() if p.decided_at else None,
        "decided_by": p.decided_by.get_username() if p.decided_by_id and p.decided_by else None,
    }


def _publish(session_id: str, event: dict[str, Any]) -> None:
    from sessions_app.bus import publish

    try:
        publish(session_id, event)
    except Exception:  # noqa: BLE001 - a lost notification must not undo the change; clients re-read on open
        log.warning("skill_proposal_publish_failed", session_id=session_id, exc_info=True)


def _on_commit_publish(proposal: SkillProposal, action: str) -> None:
    event = SkillProposalUpdate(session_id=str(proposal.session_id), proposal=proposal_to_dict(proposal),
                                action=action).to_dict()
    transaction.on_commit(partial(_publish, str(proposal.session_id), event), robust=True)


def _turn_tool_calls(session_id: str) -> tuple[int, int, int]:
    """(successful tool calls of the running turn so far, the seq of its user message, the session's last seq)."""
    from sessions_app.models import Message
    from sessions_app.selectors import DISPLAY

    rows = Message.objects.filter(session_id=session_id)
    last_user = (rows.filter(role="user", buffer__in=DISPLAY).order_by("-seq").values_list("seq", flat=True).first()
                 or 0)
    results = rows.filter(role="tool", seq__gt=last_user).exclude(name="skill_write").values_list("content", flat=True)
    # A failed call's result starts with "Error", a refused one's (approval denied, repeated call) with "Not run:".
    ok = sum(1 for text in results if not (text or "").lstrip().startswith(("Error", "Not run:")))
    return ok, last_user, rows.aggregate(top=Max("seq"))["top"] or 0


def _updates(name: str) -> str:
    store = get_store()
    try:
        skill = store.get(name)
    except SkillNotFound:
        return ""
    if skill.source == "bundled":
        return "bundled"
    current = store.current_version(name)
    return str(current) if current is not None else "edited"


def _same_as_current(name: str, description: str, body: str) -> bool:
    try:
        current = parse_skill(get_store().read_file(name, SKILL_FILE))
    except (SkillNotFound, SkillFormatError):
        return False
    return current.description == description and current.body.strip() == body.strip()


def proposal_create(*, user_id: int, session_id: str, profile_id: str, content: str, note: str = "") -> SkillProposal:
    """Keep a SKILL.md the agent proposed during the running turn (a draft until the turn ends well).

    Raises BadRequest (invalid SKILL.md, too early in the turn, nothing changed) or Conflict
    (a proposal was already made in this turn).
    """
    try:
        doc = check_tree({SKILL_FILE: content.encode("utf-8")})
    except SkillFormatError as exc:
        raise BadRequest(f"the SKILL.md is not valid: {exc}") from None
    needed = int(settings.SKILLS_PROPOSE_MIN_TOOL_CALLS)
    done, turn_start, last_seq = _turn_tool_calls(session_id)
    if done < needed:
        raise BadRequest(
            f"not now: propose a skill only after a task that took at least {needed} successful tool calls in "
            f"this turn (this one has {done}). Finish the user's request first.")
    with transaction.atomic():
        earlier = SkillProposal.objects.select_for_update().filter(
            session_id=session_id, status=SkillProposal.Status.DRAFT, after_seq__gte=turn_start).first()
        if earlier is not None:
            raise Conflict(f"you already proposed the skill {earlier.name!r} in this turn; one proposal per turn")
        updates = _updates(doc.name)
        if updates and _same_as_current(doc.name, doc.description, doc.body):
            raise BadRequest(f"the skill {doc.name!r} already has exactly this description and these instructions; "
                             "nothing to propose")
        proposal = SkillProposal.objects.create(
            owner_id=user_id, session_id=session_id, profile_id=profile_id, name=doc.name,
            description=doc.description, content=content, note=note.strip()[:2000], updates=updates,
            after_seq=last_seq,
        )
    log.info("skill_proposed", skill=doc.name, proposal_id=proposal.pk, session_id=session_id)
    return proposal


def _ended_well(session_id: str, after_seq: int) -> bool:
    """Whether the turn that follows ``after_seq`` ended with a final answer (not stopped, cut or failed)."""
    from sessions_app.models import Message
    from sessions_app.selectors import DISPLAY

    rows = list(Message.objects.filter(session_id=session_id, seq__gt=after_seq, buffer__in=DISPLAY)
                .order_by("seq").only("role", "content", "tool_calls", "interrupted", "metadata"))
    turn = []
    for row in rows:
        if row.role == "user":
            break
        turn.append(row)
    if not turn:
        return False
    last = turn[-1]
    meta = last.metadata or {}
    return (last.role == "assistant" and not last.tool_calls and not last.interrupted
            and bool((last.content or "").strip()) and not any(meta.get(k) for k in FINAL_MARKERS))


def proposals_after_turn(session_id: str) -> None:
    """Turn-finished hook: show the turn's draft proposals if it ended well, else drop them."""
    drafts = list(SkillProposal.objects.filter(session_id=session_id, status=SkillProposal.Status.DRAFT))
    for draft in drafts:
        with transaction.atomic():
            proposal = SkillProposal.objects.select_for_update().filter(
                pk=draft.pk, status=SkillProposal.Status.DRAFT).first()
            if proposal is None:
                continue
            if _ended_well(session_id, proposal.after_seq):
                proposal.status = SkillProposal.Status.PENDING
                proposal.save(update_fields=["status"])
                _on_commit_publish(proposal, "proposed")
                log.info("skill_proposal_shown", proposal_id=proposal.pk, skill=proposal.name)
            else:
                proposal.status = SkillProposal.Status.DROPPED
                proposal.save(update_fields=["status"])
                log.info("skill_proposal_dropped", proposal_id=proposal.pk, reason="the turn did not end well")


def proposal_access(*, user: Any, proposal_id: int) -> SkillProposal:
    """The user's proposal (drafts and dropped ones are nobody's to see). Raises NotFound."""
    proposal = SkillProposal.objects.select_related("decided_by").filter(
        pk=proposal_id, owner_id=user.pk).exclude(status__in=(SkillProposal.Status.DRAFT,
                                                              SkillProposal.Status.DROPPED)).first()
    if proposal is None:
        raise NotFound(f"Skill proposal {proposal_id} not found.")
    return proposal


def _files_for(name: str, content: str) -> Files:
    """The new version's files: the proposed SKILL.md plus the skill's other files, if it exists."""
    files: Files = {}
    try:
        files = get_store().files(name)
    except SkillNotFound:
        pass
    except SkillFormatError as exc:
        raise BadRequest(f"the existing skill {name!r} cannot be read ({exc}); fix or remove it first") from None
    files[SKILL_FILE] = content.encode("utf-8")
    return files


def proposal_accept(*, user: Any, proposal_id: int, content: str | None = None) -> SkillProposal:
    """Save the proposal (or the user's edited Markdown) as a new version and enable it for the
    session's profile. Raises NotFound, PermissionDenied, Conflict (already decided, or an edit renamed
    it to another existing skill), BadRequest."""
    proposal = proposal_access(user=user, proposal_id=proposal_id)
    if not may_write_skills(user, proposal.profile_id):
        raise PermissionDenied("Only staff users may add skills (an administrator can allow skill_write for all users).")
    text = proposal.content if content is None else content.replace("\r\n", "\n")
    try:
        doc = check_tree({SKILL_FILE: text.encode("utf-8")})
    except SkillFormatError as exc:
        raise BadRequest(f"The skill was not saved: {exc}") from None
    if doc.name != proposal.name and doc.name in get_store().scan().skills:
        raise Conflict(f"The skill was not saved: a skill named {doc.name!r} already exists. Keep the proposed name "
                       f"{proposal.name!r} or choose a new one.")
    with transaction.atomic():
        locked = SkillProposal.objects.select_for_update().get(pk=proposal.pk)
        if locked.status != SkillProposal.Status.PENDING:
            raise Conflict(f"This proposal was already {locked.status}.")
        try:
            version = get_store().save(doc.name, _files_for(doc.name, text), source="proposal",
                                       by=user.get_username(), note=locked.note or f"proposal {locked.pk}")
        except SkillFormatError as exc:
            raise BadRequest(f"The skill was not saved: {exc}") from None
        profile_enable_skill(profile_id=locked.profile_id, name=doc.name)
        locked.name, locked.description, locked.content = doc.name, doc.description, text
        locked.status, locked.version = SkillProposal.Status.ACCEPTED, version.number
        locked.decided_by, locked.decided_at = user, timezone.now()
        locked.save()
        _on_commit_publish(locked, "accepted")
    log.info("skill_proposal_accepted", proposal_id=locked.pk, skill=doc.name, version=version.number)
    return locked


def proposal_discard(*, user: Any, proposal_id: int) -> SkillProposal:
    """Discard a pending proposal. Raises NotFound or Conflict (already decided)."""
    proposal = proposal_access(user=user, proposal_id=proposal_id)
    with transaction.atomic():
        locked = SkillProposal.objects.select_for_update().get(pk=proposal.pk)
        if locked.status != SkillProposal.Status.PENDING:
            raise Conflict(f"This proposal was already {locked.status}.")
        locked.status, locked.decided_by, locked.decided_at = SkillProposal.Status.DISCARDED, user, timezone.now()
        locked.save(update_fields=["status", "decided_by", "decided_at"])
        _on_commit_publish(locked, "discarded")
    return locked


# ---------------------------------------------------------------------------- skills


def profile_enable_skill(*, profile_id: str, name: str) -> None:
    """List skill ``name`` in a profile's prompt (nothing if the profile lists every skill). Call inside a
    transaction; an unknown profile is ignored."""
    profile = AgentProfile.objects.select_for_update().filter(pk=profile_id).first()
    if profile is None:
        return
    names = list(profile.enabled_skills or [])
    if "*" not in names and name not in names:
        profile.enabled_skills = [*names, name]
        profile.save(update_fields=["enabled_skills", "updated_at"])


def skill_set_enabled(*, user: Any, name: str, profile_id: str, enabled: bool) -> list[str]:
    """Add or remove a skill from a profile's prompt; returns the profile's new list. Staff only."""
    require_staff(user, "enable or disable skills")
    if name not in get_store().scan().skills:
        raise NotFound(f"There is no skill named {name!r}.")
    with transaction.atomic():
        profile = AgentProfile.objects.select_for_update().filter(pk=profile_id).first()
        if profile is None:
            raise NotFound(f"There is no profile {profile_id!r}.")
        names = list(profile.enabled_skills or [])
        if "*" in names:
            raise Conflict(f"The profile {profile_id!r} lists every skill (\"*\"); edit its enabled_skills in the admin.")
        if enabled and name not in names:
            names.append(name)
        elif not enabled:
            names = [n for n in names if n != name]
        profile.enabled_skills = names
        profile.save(update_fields=["enabled_skills", "updated_at"])
    return names


def skill_rollback(*, user: Any, name: str, version: int) -> Version:
    """Make an earlier version current again (as a new version). Staff only."""
    require_staff(user, "roll skills back")
    try:
        return get_store().rollback(name, version, by=user.get_username())
    except SkillNotFound as exc:
        raise NotFound(str(exc)[:1].upper() + str(exc)[1:] + ".") from None
    except SkillFormatError as exc:
        raise BadRequest(f"Version {version} of {name!r} cannot be restored: {exc}") from None


def skill_install(*, user: Any | None, files: Files, folder: str | None, replace: bool = False,
                  enable_for: list[str] | None = None) -> tuple[str, Version]:
    """Install a skill from its files (an upload or a folder, already read safely). A name that exists
    is refused unless ``replace`` (then it becomes a new version). ``user`` None is the machine's
    administrator (``manage.py skills``); else staff only. Raises BadRequest or Conflict."""
    if user is not None:
        require_staff(user, "install skills")
    try:
        doc = check_tree(files, folder=folder)
    except SkillFormatError as exc:
        raise BadRequest(f"The skill was not installed: {exc}") from None
    known = set(AgentProfile.objects.values_list("id", flat=True))
    for profile_id in enable_for or []:
        if profile_id not in known:
            raise BadRequest(f"The skill was not installed: there is no profile {profile_id!r}. "
                             f"Profiles: {', '.join(sorted(known)) or 'none'}.")
    store = get_store()
    existing = store.scan().skills.get(doc.name)
    if existing is not None and not replace:
        if existing.source == "bundled":
            raise Conflict(f"A bundled skill is named {doc.name!r}; install with replace to use yours instead of it "
                           "(removing yours later brings the bundled one back), or rename it.")
        raise Conflict(f"A skill named {doc.name!r} already exists; install it as its next version (replace) "
                       "or rename it in its SKILL.md and folder.")
    try:
        version = store.save(doc.name, files, source="install", by=user.get_username() if user else "manage.py")
    except SkillFormatError as exc:
        raise BadRequest(f"The skill was not installed: {exc}") from None
    with transaction.atomic():
        for profile_id in enable_for or []:
            profile_enable_skill(profile_id=profile_id, name=doc.name)
    return doc.name, version


__all__ = [
    "PermissionDenied", "may_write_skills", "proposal_accept", "proposal_create", "proposal_discard", "proposals_after_turn",
    "skill_install", "skill_rollback", "skill_set_enabled",
]
