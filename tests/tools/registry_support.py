"""Helpers for the registry/loader/meta/MCP tests: isolated dirs and context vars."""
from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent import ctx
from tools_app import selectors
from tools_app.registry import ToolRegistry


@pytest.fixture
def tools_env(settings: Any, tmp_path: Path) -> SimpleNamespace:
    """TOOLS_DIR, SESSION_FILES_DIR, DATA_DIR and MCP_SERVERS_FILE under tmp_path; ToolConfig cache cleared."""
    settings.TOOLS_DIR = tmp_path / "tools"
    settings.TOOLS_DIR.mkdir()
    settings.BUNDLED_TOOLS_DIR = None  # only the test's own tools
    settings.SESSION_FILES_DIR = tmp_path / "session_files"
    settings.SESSION_FILES_DIR.mkdir(exist_ok=True)
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    settings.MCP_SERVERS_FILE = tmp_path / "mcp_servers.json"
    settings.TOOL_MANUALS_DIR = tmp_path / "manuals"
    selectors.invalidate_tool_configs()
    yield SimpleNamespace(tools=settings.TOOLS_DIR, sessions=settings.SESSION_FILES_DIR, data=settings.DATA_DIR,
                          mcp_file=settings.MCP_SERVERS_FILE, manuals=settings.TOOL_MANUALS_DIR)
    selectors.invalidate_tool_configs()


def write_tool_file(directory: Path, stem: str, body: str) -> Path:
    path = directory / f"{stem}.py"
    path.write_text(textwrap.dedent(body).lstrip(), encoding="utf-8")
    return path


GOOD_TOOL = '''
name = "{name}"
description = "Greets someone by name."
parameters = {{"type": "object", "properties": {{"who": {{"type": "string"}}}}, "required": ["who"]}}


async def execute(params: dict) -> str:
    return "hello " + params["who"]
'''


def good_tool(name: str) -> str:
    return GOOD_TOOL.format(name=name)


@contextlib.contextmanager
def run_context(*, role: str | None = "staff", session_id: str | None = "sess-1", user_id: int | None = 1,
                profile: Any = None) -> Iterator[None]:
    """Set the agent context vars for the duration of a block."""
    tokens = [
        (ctx.current_user_role, ctx.current_user_role.set(role)),
        (ctx.current_session_id, ctx.current_session_id.set(session_id)),
        (ctx.current_user_id, ctx.current_user_id.set(user_id)),
        (ctx.current_profile, ctx.current_profile.set(profile)),
    ]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def meta_registry() -> ToolRegistry:
    """A registry with the meta tools as builtins (no world tools), user tools loaded."""
    from tools_app.builtins_meta import META_TOOLS

    registry = ToolRegistry()
    for tool in META_TOOLS:
        registry.register_builtin(tool)
    registry.reload_user_tools()
    return registry
