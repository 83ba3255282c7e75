"""Navi's own builtins: tools about tools, planning and working memory.

``spawn_agent`` and ``switch_profile`` live in the agent core; the memory and
recall tools register themselves through ``tools_app.registry.register_builtin``.
"""
from __future__ import annotations

from tools_app.base import Tool
from tools_app.builtins_meta.manage import (
    FindToolsTool,
    ListToolsTool,
    McpStatusTool,
    ReloadToolsTool,
    TestToolTool,
    ToolManualTool,
)
from tools_app.builtins_meta.reflect import ReflectTool
from tools_app.builtins_meta.scratchpad import ScratchpadTool
from tools_app.builtins_meta.session_search import SessionSearchTool
from tools_app.builtins_meta.todo import TodoTool, read_todo, set_todo
from tools_app.builtins_meta.write_tool import WriteToolTool

META_TOOLS: tuple[type[Tool], ...] = (
    TodoTool,
    ScratchpadTool,
    ReflectTool,
    ReloadToolsTool,
    WriteToolTool,
    ListToolsTool,
    ToolManualTool,
    TestToolTool,
    McpStatusTool,
    FindToolsTool,
    SessionSearchTool,
)

__all__ = ["META_TOOLS", "read_todo", "set_todo"]
