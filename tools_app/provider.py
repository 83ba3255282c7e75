"""The tools app's side of the agent's ports (``agent.ports``): the tool registry and the todo board."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tools_app.builtins_meta.todo import complete_next, read_todo, restore_todo, set_todo
from tools_app.registry import ToolRegistry, aget_registry, get_registry


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
