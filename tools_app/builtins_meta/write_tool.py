"""``write_tool``: the agent installs a new user tool (spec 002 "Self-extension via write_tool").

Validates without running the code (see ``codecheck`` for the policy), writes
``TOOLS_DIR/<name>.py`` atomically (the user tools directory, in the data directory: never the
source tree), adds the name to ``TOOLS_DIR/enabled.json`` (atomic),
reloads the user tools and reports whether the new one loaded. Staff only.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

from django.conf import settings

from tools_app.base import ToolError, ToolResult
from tools_app.builtins_meta.codecheck import check_tool_source
from tools_app.builtins_meta.manage import RegistryTool
from tools_app.fileio import atomic_write_json, atomic_write_text, path_lock
from tools_app.loader import ENABLED_FILE, validate_name

MAX_SOURCE_CHARS = 100_000

EXAMPLE = '''name = "word_count"
description = "Count the words in a text. Use it when the user asks how long a text is."
parameters = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to count."}},
    "required": ["text"],
}


async def execute(params: dict) -> str:
    return str(len(params["text"].split()))
'''


def _forbidden_roots() -> list[Path]:
    roots = [Path(settings.TOOLS_DIR), Path(settings.SESSION_FILES_DIR), Path(settings.DATA_DIR)]
    roots += [Path(p).expanduser() for p in getattr(settings, "FS_ALLOWED_PATHS", []) if p and p != "*"]
    return roots


def _check_name(name: str, reserved: set[str]) -> None:
    if any(part in name for part in ("/", "\\", "..")) or name.startswith("~"):
        raise ToolError(f"invalid tool name {name!r}: a tool name is not a path; use lowercase letters, digits "
                        "and underscores (e.g. weather_lookup). The file is always <name>.py in the user tools directory")
    problem = validate_name(name, reserved)
    if problem:
        raise ToolError(problem)


def _read_enabled(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ToolError(f"{ENABLED_FILE} is not valid JSON ({exc}); ask an administrator to fix it first") from None
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise ToolError(f"{ENABLED_FILE} must be a JSON list of names; ask an administrator to fix it first")
    return data


def _install(tools_dir: Path, name: str, code: str) -> None:
    enabled_path = tools_dir / ENABLED_FILE
    with path_lock(enabled_path):
        enabled = _read_enabled(enabled_path)  # before writing anything: refuse early if it is broken
        atomic_write_text(tools_dir / f"{name}.py", code if code.endswith("\n") else code + "\n")
        if name not in enabled:
            atomic_write_json(enabled_path, [*enabled, name])


class WriteToolTool(RegistryTool):
    name: ClassVar[str] = "write_tool"
    description: ClassVar[str] = (
        "Install a new user tool permanently: writes <name>.py into the user tools directory, enables it for "
        "every profile and reloads. "
        "'code' must be a Python module in this format:\n" + EXAMPLE +
        "Rules: `name` must equal the 'name' argument; `parameters` is a literal JSON schema; execute gets the "
        "arguments dict and returns a string (raise an exception to fail). Module level may only hold imports "
        "of installed packages, constants, def and class: no calls at import time (no print(), open(), "
        "os.system() outside functions), no decorators. Set overwrite=true to replace your own tool. The new "
        "tool is usable from the next message; check it with test_tool."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Tool name: lowercase letters, digits, underscores."},
            "code": {"type": "string", "description": "The complete Python module."},
            "overwrite": {"type": "boolean", "description": "Replace an existing user tool of that name."},
        },
        "required": ["name", "code"],
    }
    dangerous: ClassVar[bool] = True
    timeout: ClassVar[float] = 60.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        name, code = params["name"].strip(), params["code"]
        registry = self.registry
        _check_name(name, registry.reserved_names())
        self._check_existing(name, overwrite=bool(params.get("overwrite")))
        if len(code) > MAX_SOURCE_CHARS:
            raise ToolError(f"the code is {len(code)} characters; the limit is {MAX_SOURCE_CHARS}")
        problems = check_tool_source(code, expected_name=name, forbidden_roots=_forbidden_roots())
        if problems:
            raise ToolError("the tool was not written:\n- " + "\n- ".join(problems))
        await asyncio.to_thread(_install, registry.tools_dir, name, code)
        report = await asyncio.to_thread(registry.reload_user_tools)
        if name in report.loaded:
            return ToolResult(success=True, output=(
                f"Wrote {name}.py to the user tools directory, enabled it for all profiles and reloaded. It is "
                f"usable from the next "
                f"message; test it now with test_tool (name={name!r})."))
        errors = [e.error for e in report.errors if e.file == f"{name}.py"] or ["it did not load"]
        raise ToolError(f"wrote {name}.py but it failed to load: {errors[0]}. "
                        "Fix it and call write_tool again with overwrite=true.")

    def _check_existing(self, name: str, *, overwrite: bool) -> None:
        existing = self.registry.get(name)
        if existing is not None and existing.source == "user" and getattr(existing, "_file", "") != f"{name}.py":
            raise ToolError(f"a user tool named {name!r} already exists in {getattr(existing, '_file', '?')}; choose another name")
        mine = (self.registry.tools_dir / f"{name}.py").exists()
        if (mine or (existing is not None and existing.source == "user")) and not overwrite:
            whose = "" if mine else " (a tool bundled with Navi: your version would replace it)"
            raise ToolError(f"a tool named {name!r} already exists{whose}; pass overwrite=true to replace it, "
                            "or pick a new name")
