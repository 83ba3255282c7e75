"""The tools app's side of the agent's ports (``agent.ports``): the tool registry, the todo board and
the session's working directory."""
from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from tools_app.builtins_meta.todo import complete_next, read_todo, restore_todo, set_todo
from tools_app.registry import ToolRegistry, aget_registry, get_registry
from tools_app.safety.paths import SESSION_ID


class RegistryToolProvider:
    """The process-wide tool registry as the agent's ToolProvider."""

    async def for_turn(self) -> ToolRegistry:
        return await aget_registry()

    def on_reload(self, callback: Callable[[], None]) -> None:
        get_registry().on_reload(callback)


class FileTodoBoard:
    """The todo list kept in the session's state directory (the `todo` tool's own file)."""

    def read(self, session_id: str) -> list[dict[str, Any]]:
        return read_todo(session_id)

    def replace(self, session_id: str, steps: list[str]) -> None:
        set_todo(session_id, steps)

    def restore(self, session_id: str, steps: list[dict[str, Any]]) -> None:
        restore_todo(session_id, steps)

    def complete_next(self, session_id: str, note: str) -> None:
        complete_next(session_id, note)


class SessionWorkspace:
    """The session's working directory (``SESSION_FILES_DIR/<session>/``), as far as the agent's
    context needs it: which files a message names."""

    MAX_ENTRIES = 500  # a directory this big is listed only this far
    MAX_NAMED = 5

    def named_files(self, session_id: str, text: str) -> list[tuple[str, int]]:
        root = Path(settings.SESSION_FILES_DIR) / session_id
        lowered = (text or "").lower()
        if not lowered or not SESSION_ID.match(session_id) or not root.is_dir():
            return []
        found: list[tuple[int, str, int]] = []
        for relative, entry in _entries(root, self.MAX_ENTRIES):
            name = entry.name.lower()
            if len(name) < 3 or name.startswith("."):
                continue
            match = re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w-])", lowered)
            if match:
                try:
                    found.append((match.start(), relative, entry.stat(follow_symlinks=False).st_size))
                except OSError:
                    continue
        return [(relative, size) for _, relative, size in sorted(found)[: self.MAX_NAMED]]  # as the message names them


def _entries(root: Path, limit: int) -> list[tuple[str, os.DirEntry[str]]]:
    """Regular files at the top of ``root`` and one directory below (uploads/), at most ``limit``."""
    out: list[tuple[str, os.DirEntry[str]]] = []
    try:
        with os.scandir(root) as top:
            for entry in top:
                if len(out) >= limit:
                    break
                if entry.is_file(follow_symlinks=False):
                    out.append((entry.name, entry))
                elif entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
                    with os.scandir(entry.path) as inner:
                        for sub in inner:
                            if len(out) >= limit:
                                break
                            if sub.is_file(follow_symlinks=False):
                                out.append((f"{entry.name}/{sub.name}", sub))
    except OSError:
        return out
    return out
