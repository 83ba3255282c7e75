"""``scratchpad``: named working notes per session (spec 002), in ``<session>/.navi/scratchpad.json``.

Sections come from the profile's ``scratchpad_sections``; a profile without any
accepts any short lowercase name.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from tools_app.base import Tool, ToolError, ToolResult
from tools_app.builtins_meta.session_files import profile_attr, require_session, state_dir
from tools_app.fileio import atomic_write_json, locked_update, read_json

SECTION_RE = re.compile(r"^[a-z0-9_-]{1,40}$")
MAX_SECTION_CHARS = 20_000


def scratchpad_path(session_id: str) -> Path:
    return state_dir(session_id) / "scratchpad.json"


def _allowed_sections() -> list[str]:
    sections = profile_attr("scratchpad_sections", None) or []
    return [s for s in sections if isinstance(s, str)]


def _check_section(section: str | None, *, required: bool) -> str | None:
    if section is None:
        if required:
            raise ToolError(f"this action needs 'section'; {_sections_hint()}")
        return None
    allowed = _allowed_sections()
    if allowed and section not in allowed:
        raise ToolError(f"unknown section '{section}'; {_sections_hint()}")
    if not allowed and not SECTION_RE.match(section):
        raise ToolError("section names use 1-40 lowercase letters, digits, '_' or '-' (e.g. findings)")
    return section


def _sections_hint() -> str:
    allowed = _allowed_sections()
    return f"sections for this profile: {', '.join(allowed)}" if allowed else "use any short lowercase name"


def _load(path: Path) -> dict[str, str]:
    try:
        data = read_json(path, {})
    except ValueError:
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def _render(pad: dict[str, str], section: str | None) -> str:
    if section is not None:
        text = pad.get(section, "")
        return f"## {section}\n{text}" if text else f"Section '{section}' is empty."
    filled = [f"## {name}\n{text}" for name, text in pad.items() if text]
    return "\n\n".join(filled) if filled else f"The scratchpad is empty ({_sections_hint()})."


def _apply(path: Path, action: str, section: str | None, content: str) -> str:
    pad = _load(path)
    if action == "read":
        return _render(pad, section)
    if action == "clear":
        if section is None:
            pad = {}
        else:
            pad.pop(section, None)
        atomic_write_json(path, pad)
        return f"Cleared {'the scratchpad' if section is None else f'section {section}'}."
    assert section is not None
    text = content if action == "write" else "\n".join(p for p in (pad.get(section, ""), content) if p)
    if len(text) > MAX_SECTION_CHARS:
        raise ToolError(
            f"section '{section}' would hold {len(text)} characters (max {MAX_SECTION_CHARS}); "
            "summarise it with action=write first"
        )
    pad[section] = text
    atomic_write_json(path, pad)
    return f"Saved section '{section}' ({len(text)} characters)."


class ScratchpadTool(Tool):
    name: ClassVar[str] = "scratchpad"
    description: ClassVar[str] = (
        "Your working notes for this session, kept in named sections. action=write replaces a section with "
        "'content', action=append adds 'content' to it, action=read shows one section (or all without "
        "'section'), action=clear empties one section (or all). Use it to keep findings, sources, logs and "
        "drafts out of your head so they survive long tasks."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["write", "append", "read", "clear"]},
            "section": {"type": "string", "description": "Section name (the profile lists the allowed ones)."},
            "content": {"type": "string", "description": "Text for write/append."},
        },
        "required": ["action"],
    }
    timeout: ClassVar[float] = 10.0

    def records(self, params: dict[str, Any]) -> bool:
        """Scratch notes are words kept: a file they name is not read by them (``Tool.records``)."""
        return True

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        path = scratchpad_path(require_session())
        action = params["action"]
        section = _check_section(params.get("section"), required=action in {"write", "append"})
        content = params.get("content", "")
        if action in {"write", "append"} and not content:
            raise ToolError(f"action={action} needs 'content'")
        output = await locked_update(path, lambda p: _apply(p, action, section, content))
        return ToolResult(success=True, output=output)
