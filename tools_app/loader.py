"""User tools: ``tools/*.py`` (bundled) and ``TOOLS_DIR/*.py`` in the module-level format (spec 002 "Tool Format").

Each file is imported as ``navi_user_tools.<stem>``, validated, and wrapped in a
``Tool`` subclass with ``source = "user"``. A broken file (syntax error, import
error, exception at import, missing or invalid attribute) is reported as a
``LoadError`` and skipped, never fatal. Files whose name starts with ``_`` are
ignored. Unchanged files are not re-imported on reload.

Optional module attributes: ``timeout``, ``dangerous``, ``untrusted_output``, ``records`` (True: every call only
keeps or finds words, as a notes tool does, so a file its words name is not read by it; ``Tool.records``), and
``doubt(params, request)``
(a reason the call does not fit the user's words, or None; for small local models only, and advisory:
the model is told the reason instead, and the same tool called again runs; or an ``agent.ports.Doubt``,
held as firmly as it says).
"""
from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import re
import sys
import types
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agent.ports import Doubt
from tools_app.base import Tool, ToolError, ToolResult

log = structlog.get_logger(__name__)

PACKAGE = "navi_user_tools"
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
ENABLED_FILE = "enabled.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadError:
    """A user tool file (or enabled.json) that could not be used, and why."""

    file: str
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadResult:
    tools: dict[str, Tool] = field(default_factory=dict)
    errors: list[LoadError] = field(default_factory=list)
    enabled: list[str] = field(default_factory=list)


class UserTool(Tool):
    """Base of the wrappers the loader builds; ``_func`` is the module's ``execute``."""

    source = "user"
    _func: Callable[[dict[str, Any]], Any]
    _doubt_func: Callable[[dict[str, Any], str], str | Doubt | None] | None = None
    _records: bool = False
    _file: str

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        func = type(self)._func
        try:
            if inspect.iscoroutinefunction(func):
                value = await func(dict(params))
            else:  # sync execute: keep the event loop free
                value = await asyncio.to_thread(func, dict(params))
                if inspect.isawaitable(value):  # a callable object or partial returning a coroutine
                    value = await value
        except ToolError:
            raise
        except Exception as exc:  # the documented way for a user tool to fail
            log.info("user_tool_raised", tool=self.name, file=self._file, error=repr(exc))
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        return _as_result(value)

    def records(self, params: dict[str, Any]) -> bool:
        """The module's optional ``records``: every call only keeps or finds words."""
        return type(self)._records

    def doubt(self, params: dict[str, Any], request: str) -> Doubt | None:
        """The module's optional ``doubt(params, request)``: a reason the call does not fit the user's words
        (a string), or None. Advisory: the model is told the reason instead of the call running, and the
        same call made again after that runs (the tool's words may miss how the user put it). A module that
        returns an ``agent.ports.Doubt`` says itself how firmly it holds it."""
        func = type(self)._doubt_func
        reason = func(dict(params), request) if func is not None else None
        if isinstance(reason, Doubt):  # the module's own Doubt, held as firmly as it says
            return reason
        return Doubt(reason=str(reason), answer=True, repeated_runs=True) if reason else None


def _as_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(success=True, output=value)
    if value is None:
        return ToolResult(success=True, output="")
    try:
        return ToolResult(success=True, output=json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return ToolResult(success=True, output=str(value))


# --- module import -------------------------------------------------------------

def _ensure_package() -> None:
    if PACKAGE not in sys.modules:
        package = types.ModuleType(PACKAGE)
        package.__path__ = []  # a namespace for the user modules; nothing is importable through it
        sys.modules[PACKAGE] = package


def _import(path: Path, prefix: str = "") -> types.ModuleType:
    """Import ``path`` fresh as ``navi_user_tools.<prefix><stem>`` (any previous version is dropped first)."""
    _ensure_package()
    module_name = f"{PACKAGE}.{prefix}{path.stem}"
    sys.modules.pop(module_name, None)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def describe_exception(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    return f"{type(exc).__name__}: {exc}"


# --- validation ------------------------------------------------------------------

def validate_name(name: object, reserved: Collection[str]) -> str | None:
    """Why ``name`` cannot be a user tool name, or None if it can."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        return (
            f"invalid tool name {name!r}: use 2-64 lowercase letters, digits and underscores, "
            "starting with a letter (e.g. weather_lookup)"
        )
    if name.startswith("mcp__"):
        return f"tool name {name!r} is reserved for MCP tools (mcp__<server>__<tool>)"
    if name in reserved:
        return f"tool name {name!r} is a built-in tool and cannot be replaced by a user tool"
    return None


def validate_parameters(parameters: object) -> str | None:
    """Why ``parameters`` is not a usable JSON schema for tool arguments, or None."""
    if not isinstance(parameters, dict):
        return "'parameters' must be a dict (a JSON schema with \"type\": \"object\")"
    if parameters.get("type") != "object":
        return "'parameters' must be a JSON schema with \"type\": \"object\" at the top"
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as exc:
        return f"'parameters' is not a valid JSON schema: {exc.message}"
    return None


def _check_module(module: types.ModuleType, reserved: Collection[str]) -> str | None:
    missing = [attr for attr in ("name", "description", "parameters", "execute") if not hasattr(module, attr)]
    if missing:
        return f"missing module-level {', '.join(missing)} (see the tool format: name, description, parameters, execute)"
    problem = validate_name(module.name, reserved)
    if problem:
        return problem
    if not isinstance(module.description, str) or not module.description.strip():
        return "'description' must be a non-empty string"
    problem = validate_parameters(module.parameters)
    if problem:
        return problem
    if not callable(module.execute):
        return "'execute' must be a function: async def execute(params: dict) -> str"
    timeout = getattr(module, "timeout", 60.0)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        return "'timeout' (optional) must be a positive number of seconds"
    if not isinstance(getattr(module, "records", False), bool):
        return "'records' (optional) must be True or False: True when every call only keeps or finds words"
    return None


def _wrap(module: types.ModuleType, path: Path) -> Tool:
    attrs: dict[str, Any] = {
        "name": module.name,
        "description": module.description.strip(),
        "parameters": module.parameters,
        "timeout": float(getattr(module, "timeout", 60.0)),
        "dangerous": bool(getattr(module, "dangerous", False)),
        "untrusted_output": bool(getattr(module, "untrusted_output", False)),
        "_records": bool(getattr(module, "records", False)),
        "_func": staticmethod(module.execute),
        "_doubt_func": staticmethod(module.doubt) if callable(getattr(module, "doubt", None)) else None,
        "_file": path.name,
        "__module__": module.__name__,
    }
    cls = type(f"UserTool_{module.name}", (UserTool,), attrs)
    return cls()


# --- directory loading -------------------------------------------------------------

@dataclass(slots=True)
class _Cached:
    stamp: tuple[int, int]
    tool: Tool
    module: str


class UserToolLoader:
    """Loads tool directories; remembers what it imported so a reload re-imports only changed files.

    ``load`` takes the bundled directory (tools/ of the source tree) first and the user's
    (TOOLS_DIR) last: a user tool replaces a bundled tool of the same name, so a bundled tool can
    be customised without touching the source tree. ``enabled.json`` of every directory counts.
    """

    def __init__(self) -> None:
        self._cache: dict[Path, _Cached] = {}

    def load(self, tools_dirs: Path | Sequence[Path], *, reserved: Collection[str]) -> LoadResult:
        dirs = [tools_dirs] if isinstance(tools_dirs, Path) else list(tools_dirs)
        errors: list[LoadError] = []
        enabled = [name for d in dirs for name in read_enabled(d, errors=errors)]
        result = LoadResult(enabled=list(dict.fromkeys(enabled)), errors=errors)
        present: set[Path] = set()
        for index, tools_dir in enumerate(dirs):
            files = sorted(tools_dir.glob("*.py")) if tools_dir.is_dir() else []
            present.update(files)
            prefix = "" if index == len(dirs) - 1 else f"d{index}__"  # the user's keep their plain names
            seen: dict[str, str] = {}
            for path in files:
                if path.name.startswith("_"):
                    continue
                tool, error = self._load_file(path, reserved, prefix)
                if error is None and tool is not None and tool.name in seen:
                    error = f"tool name {tool.name!r} is already defined by {seen[tool.name]}"
                if error is not None or tool is None:
                    result.errors.append(LoadError(file=path.name, error=error or "not loaded"))
                    continue
                if tool.name in result.tools:
                    log.info("bundled_tool_replaced", tool=tool.name, file=str(path))
                seen[tool.name] = path.name
                result.tools[tool.name] = tool
        self._forget_removed(present)
        return result

    def _load_file(self, path: Path, reserved: Collection[str], prefix: str = "") -> tuple[Tool | None, str | None]:
        stat = path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._cache.get(path)
        if cached is not None and cached.stamp == stamp:
            problem = validate_name(cached.tool.name, reserved)  # builtins may have appeared since
            return (None, problem) if problem else (cached.tool, None)
        self._cache.pop(path, None)
        try:
            module = _import(path, prefix)
        except BaseException as exc:  # noqa: BLE001 - anything a user file does at import is reported
            if isinstance(exc, KeyboardInterrupt):
                raise
            log.warning("user_tool_import_failed", file=path.name, error=describe_exception(exc))
            return None, describe_exception(exc)
        problem = _check_module(module, reserved)
        if problem:
            return None, problem
        tool = _wrap(module, path)
        self._cache[path] = _Cached(stamp=stamp, tool=tool, module=module.__name__)
        return tool, None

    def _forget_removed(self, present: set[Path]) -> None:
        for path in list(self._cache):
            if path not in present:
                sys.modules.pop(self._cache.pop(path).module, None)


def read_enabled(tools_dir: Path, *, errors: list[LoadError]) -> list[str]:
    """Names in ``enabled.json`` (missing file = none; invalid = none plus an error)."""
    path = tools_dir / ENABLED_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        errors.append(LoadError(file=ENABLED_FILE, error=f"not valid JSON ({exc}); no user tool is enabled"))
        return []
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        errors.append(LoadError(file=ENABLED_FILE, error="must be a JSON list of tool names; no user tool is enabled"))
        return []
    return list(dict.fromkeys(data))
