"""The skill tools the model calls: ``skill_view`` (progressive disclosure) and ``skill_write``
(the learning loop). Ordinary registered builtins: a profile offers them through enabled_tools.

The system prompt only lists the enabled skills' names and descriptions; ``skill_view`` returns a
skill's instructions, or one of its files, when a request needs them. Its result carries
``metadata["skill"]``, which the loop stores on the tool message: that is how a turn records the
skill it used (the chat shows it as a chip on the turn).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from asgiref.sync import sync_to_async

from agent.ctx import current_profile, current_session_id, current_user_id
from navi_site.errors import NaviError
from skills_app.catalog import enabled_names, get_catalog
from skills_app.format import SKILL_FILE, SkillFormatError
from skills_app.store import SkillNotFound, get_store
from tools_app.base import Tool, ToolError, ToolResult


def _enabled(skills: Iterable[str]) -> list[str]:
    """The skills of the run's profile (the ones its prompt lists)."""
    profile = current_profile.get()
    return enabled_names(profile, list(skills)) if profile is not None else []


def _enabled_listing() -> str:
    return ", ".join(_enabled(get_catalog().scan().skills)) or "none"


def _view(name: str, file: str | None) -> ToolResult:
    store = get_store()
    try:
        skill = get_catalog().scan().skills.get(name)  # the prompt's own index: no re-read of every skill
        if skill is None:
            raise SkillNotFound(f"there is no skill named {name!r}")
        if name not in _enabled([name]):
            raise SkillNotFound(f"the skill {name!r} is not enabled for this profile")
        if file and file.strip() and file.strip() != SKILL_FILE:
            text = store.read_file(name, file.strip(), skill=skill)
            return ToolResult(success=True, output=f"# {name}/{file.strip()}\n\n{text}",
                              metadata={"skill": name, "file": file.strip()})
    except SkillNotFound as exc:
        raise ToolError(f"{exc}. Skills of this profile: {_enabled_listing()}") from None
    except SkillFormatError as exc:
        raise ToolError(str(exc)) from None
    files = "\n".join(f"- {f}" for f in skill.files)
    more = (f"\n\nFiles of this skill (read one with skill_view name={name!r} file=<path>; run scripts only "
            f"with your normal tools):\n{files}") if files else ""
    return ToolResult(success=True, output=f"# Skill: {name}\n{skill.description}{more}\n\n---\n\n{skill.doc.body}",
                      metadata={"skill": name})


class SkillViewTool(Tool):
    name: ClassVar[str] = "skill_view"
    description: ClassVar[str] = (
        "Read a skill: saved step-by-step know-how for a kind of task (the system prompt lists the skills "
        "by name and description). Call it with the skill's 'name' before doing a task that matches a skill, "
        "then follow the instructions. With 'file' (e.g. references/checks.md or scripts/report.py) it returns "
        "that file of the skill instead."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The skill's name, e.g. server-health-check."},
            "file": {"type": "string", "description": "Optional: a file of the skill, relative to its folder."},
        },
        "required": ["name"],
    }
    timeout: ClassVar[float] = 20.0
    max_output_chars: ClassVar[int] = 40_000

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        name = str(params.get("name") or "").strip()
        if not name:
            raise ToolError(f"give the skill's 'name'. Skills of this profile: {await sync_to_async(_enabled_listing)()}")
        return await sync_to_async(_view, thread_sensitive=False)(name, params.get("file"))


class SkillWriteTool(Tool):
    name: ClassVar[str] = "skill_write"
    description: ClassVar[str] = (
        "Propose a skill to the user: reusable know-how distilled from a task you just completed with several "
        "tool calls, so the next similar request goes faster. 'content' is a complete SKILL.md: YAML front matter "
        "with 'name' (lowercase words joined by hyphens, e.g. check-backup-status) and 'description' (what it "
        "does and when to use it, one or two sentences), then Markdown instructions: the steps, the tools and "
        "arguments that worked, pitfalls, and how to check the result. Use an existing skill's name to propose "
        "an improved version of it. The user sees the proposal after your answer and accepts, edits or "
        "discards it; nothing is saved before that. At most one proposal per turn."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "The whole SKILL.md (front matter and instructions)."},
            "note": {"type": "string", "description": "One sentence for the user: why this skill, or what changed."},
        },
        "required": ["content"],
    }
    dangerous: ClassVar[bool] = True  # an accepted skill changes the prompt of everyone using the profile
    timeout: ClassVar[float] = 30.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        from skills_app.services import proposal_create

        session_id, user_id, profile = current_session_id.get(), current_user_id.get(), current_profile.get()
        if not session_id or session_id.startswith("subagent_") or user_id is None:
            raise ToolError("skills can only be proposed in a conversation with the user, not from a subagent")
        content = str(params.get("content") or "")
        if not content.strip():
            raise ToolError("'content' is empty: write the whole SKILL.md (front matter and instructions)")
        try:
            proposal = await sync_to_async(proposal_create)(
                user_id=user_id, session_id=session_id, profile_id=getattr(profile, "id", ""),
                content=content, note=str(params.get("note") or ""))
        except NaviError as exc:
            raise ToolError(exc.message) from None
        what = f"an update of the skill {proposal.name!r}" if proposal.updates else f"the new skill {proposal.name!r}"
        return ToolResult(success=True, output=(
            f"Proposed {what} (proposal {proposal.pk}). The user will see it after your answer and decide; "
            "nothing is saved until they accept. Finish your answer now and mention the proposal in one sentence."),
            metadata={"skill_proposal": proposal.pk})


SKILL_TOOLS: tuple[type[Tool], ...] = (SkillViewTool, SkillWriteTool)
