"""The tool registry: builtins, user tools (TOOLS_DIR) and MCP tools, and the one way to run them.

Builtins are never removed on reload. ``execute`` never raises for anything a
tool or the model does: unknown tool, tool not in the profile, disabled tool,
permission, bad arguments, timeout, ToolError or a bug in the tool all become a
failed ``ToolResult`` whose text tells the model what to do next.

Other apps add builtins with ``register_builtin(ToolClass)`` in ``AppConfig.ready()``.
"""
from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import structlog
from django.conf import settings

from agent.ctx import current_profile, current_session_id, current_user_role
from agent.ports import Doubt
from tools_app import execution
from tools_app.base import Tool, ToolError, ToolResult, ToolSource
from tools_app.loader import LoadError, UserToolLoader
from tools_app.mcp_client import McpManager, ServerStatus
from tools_app.selectors import allows_non_staff, atool_configs, is_enabled_globally

log = structlog.get_logger(__name__)

ToolStatus = Literal["ok", "error", "disabled", "unavailable"]
ToolLike = Tool | type[Tool]

# Documented builtin names (spec 002, 004): a user tool may never take one, even
# before the app that implements it has registered.
RESERVED_NAMES = frozenset({
    "web_search", "web_view", "filesystem", "http_request", "code_exec", "terminal", "ssh_exec", "image_view",
    "todo", "scratchpad", "reload_tools", "write_tool", "list_tools", "tool_manual", "test_tool", "mcp_status",
    "reflect", "memory_search", "memory_forget", "memory_save", "spawn_agent", "switch_profile",
    "schedule_recall", "manage_recall", "find_tools",
})


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInfo:
    """One row of ``ToolRegistry.all()``: a tool, a broken user file, or an unreachable MCP server."""

    name: str
    source: ToolSource
    status: ToolStatus
    detail: str = ""
    description: str = ""
    dangerous: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReloadReport:
    loaded: list[str]
    errors: list[LoadError]
    mcp: list[ServerStatus] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"User tools loaded ({len(self.loaded)}): {', '.join(self.loaded) or 'none'}"]
        lines += [f"  ERROR {e.file}: {e.error}" for e in self.errors]
        for server in self.mcp:
            state = f"{len(server.tools)} tools" if server.available else f"unavailable: {server.reason}"
            lines.append(f"MCP server {server.name}: {state}")
        return "\n".join(lines)


def _instance(tool: ToolLike) -> Tool:
    return tool() if isinstance(tool, type) else tool


class ToolRegistry:
    """Holds the tools; paths default to ``settings.TOOLS_DIR`` / ``settings.MCP_SERVERS_FILE`` at call time."""

    def __init__(self, *, tools_dir: Path | None = None, mcp_file: Path | None = None,
                 bundled_dir: Path | None = None) -> None:
        self._tools_dir = tools_dir
        self._bundled_dir = bundled_dir
        self._mcp_file = mcp_file
        self._lock = threading.RLock()
        self._builtins: dict[str, Tool] = {}
        self._user: dict[str, Tool] = {}
        self._user_errors: list[LoadError] = []
        self._enabled_user: list[str] = []
        self._mcp_tools: dict[str, Tool] = {}
        self._loader = UserToolLoader()
        self.mcp = McpManager()
        self._mcp_ready = False
        self._mcp_task: asyncio.Task[list[ServerStatus]] | None = None
        self._callbacks: list[Callable[[], None]] = []

    # --- paths -------------------------------------------------------------------
    @property
    def tools_dir(self) -> Path:
        """The user's tools (TOOLS_DIR, in the data directory): write_tool writes here."""
        return self._tools_dir or Path(settings.TOOLS_DIR)

    @property
    def bundled_dir(self) -> Path | None:
        """The tools shipped in the source tree (read-only for Navi); None when there are none."""
        if self._bundled_dir is not None:
            return self._bundled_dir
        bundled = getattr(settings, "BUNDLED_TOOLS_DIR", None)
        return Path(bundled) if bundled else None

    @property
    def mcp_file(self) -> Path:
        return self._mcp_file or Path(settings.MCP_SERVERS_FILE)

    # --- registration -------------------------------------------------------------
    def register_builtin(self, tool: ToolLike) -> None:
        """Add (or replace) a builtin; a user tool with that name is dropped at the next reload."""
        instance = _instance(tool)
        bind = getattr(instance, "bind_registry", None)
        if callable(bind):  # meta tools (list_tools, reload_tools, ...) work on this registry
            bind(self)
        with self._lock:
            self._builtins[instance.name] = instance
            shadowed = self._user.get(instance.name)
            if shadowed is not None:
                self._user = {k: v for k, v in self._user.items() if k != instance.name}
                self._user_errors = [*self._user_errors, LoadError(
                    file=getattr(shadowed, "_file", f"{instance.name}.py"),
                    error=f"tool name {instance.name!r} is a built-in tool and cannot be replaced by a user tool")]
        self._notify()

    def on_reload(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after every change of the tool set (e.g. to drop prompt caches).

        Callbacks may run in a worker thread (async ``reload`` loads files off the event loop):
        keep them short and thread-safe, e.g. clearing a dict.
        """
        self._callbacks.append(callback)

    def _notify(self) -> None:
        for callback in list(self._callbacks):
            try:
                callback()
            except Exception:  # noqa: BLE001 - one listener must not break a reload
                log.exception("tool_reload_callback_failed")

    # --- lookups ------------------------------------------------------------------
    def get(self, name: str) -> Tool | None:
        return self._builtins.get(name) or self._user.get(name) or self._mcp_tools.get(name)

    def names(self) -> list[str]:
        """Every registered tool: builtins (registration order), user tools, MCP tools (by name)."""
        return [*self._builtins, *sorted(self._user), *sorted(self._mcp_tools)]

    def builtin_names(self) -> set[str]:
        return set(self._builtins)

    def reserved_names(self) -> set[str]:
        """Names a user tool may not take: registered and documented builtins."""
        return set(RESERVED_NAMES | self._builtins.keys())

    @property
    def enabled_user_tools(self) -> list[str]:
        """User tools listed in enabled.json that loaded."""
        return [name for name in self._enabled_user if name in self._user]

    @property
    def load_errors(self) -> list[LoadError]:
        return list(self._user_errors)

    def tools_for_profile(self, enabled_tools: Iterable[str]) -> list[str]:
        """The profile's tools plus enabled.json user tools and MCP tools, minus unknown and disabled ones."""
        wanted = [*enabled_tools, *self.enabled_user_tools, *sorted(self._mcp_tools)]
        known = [n for n in dict.fromkeys(wanted) if self.get(n) is not None]
        return [n for n in known if is_enabled_globally(n)]

    def schemas(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """Tool definitions (``{"type": "function", ...}``) in registry order; unknown/disabled names skipped."""
        wanted = set(names)
        return [
            tool.schema() for name in self.names()
            if name in wanted and (tool := self.get(name)) is not None and is_enabled_globally(name)
        ]

    def can_use(self, name: str) -> bool:
        """Whether the current user (context vars) may run ``name``."""
        tool = self.get(name)
        return tool is not None and self._permission_problem(tool) is None

    def all(self) -> list[ToolInfo]:
        """Every tool with source and status, plus broken user files and unreachable MCP servers."""
        rows = [self._info(tool) for name in self.names() if (tool := self.get(name)) is not None]
        rows += [ToolInfo(name=Path(e.file).stem, source="user", status="error", detail=f"{e.file}: {e.error}")
                 for e in self._user_errors]
        rows += self._mcp_rows()
        return rows

    def describe(self) -> list[dict[str, Any]]:
        return [row.to_dict() for row in self.all()]

    def _info(self, tool: Tool) -> ToolInfo:
        status: ToolStatus = "ok"
        detail = ""
        if not is_enabled_globally(tool.name):
            status, detail = "disabled", "disabled by an administrator"
        elif tool.source == "mcp":
            server = self.mcp.status.get(getattr(tool, "_server", ""))
            if server is not None and not server.available:
                status, detail = "unavailable", server.reason
        return ToolInfo(name=tool.name, source=tool.source, status=status, detail=detail,
                        description=tool.description, dangerous=tool.dangerous, parameters=tool.parameters)

    def _mcp_rows(self) -> list[ToolInfo]:
        rows = [ToolInfo(name=f"mcp__{s.name}__*", source="mcp", status="unavailable",
                         detail=f"MCP server '{s.name}' unavailable: {s.reason}")
                for s in self.mcp.statuses() if not s.available and not s.tools]
        rows += [ToolInfo(name="mcp", source="mcp", status="error", detail=e) for e in self.mcp.config_errors]
        return rows

    # --- reloading ----------------------------------------------------------------
    def reload_user_tools(self) -> ReloadReport:
        """Re-read the bundled tools and TOOLS_DIR (changed files are re-imported); builtins and MCP tools stay."""
        bundled = self.bundled_dir
        dirs = [bundled, self.tools_dir] if bundled is not None and bundled != self.tools_dir else [self.tools_dir]
        result = self._loader.load(dirs, reserved=self.reserved_names())
        with self._lock:
            self._user, self._user_errors, self._enabled_user = result.tools, result.errors, result.enabled
        log.info("user_tools_loaded", loaded=sorted(result.tools), errors=len(result.errors))
        self._notify()
        return ReloadReport(loaded=sorted(result.tools), errors=list(result.errors), mcp=self.mcp.statuses())

    async def refresh_mcp(self) -> list[ServerStatus]:
        """Re-read MCP_SERVERS_FILE and list every server's tools (unreachable servers get a reason)."""
        tools = await self.mcp.discover(self.mcp_file)
        with self._lock:
            self._mcp_tools = {tool.name: tool for tool in tools}
        self._mcp_ready = True
        self._notify()
        return self.mcp.statuses()

    async def ensure_mcp(self) -> None:
        """Discover MCP tools once (concurrent callers wait for the same discovery)."""
        if self._mcp_ready:
            return
        loop = asyncio.get_running_loop()
        task = self._mcp_task
        if task is None or task.get_loop() is not loop or task.done():  # done but not ready = it failed
            task = self._mcp_task = loop.create_task(self.refresh_mcp())
        try:
            await asyncio.shield(task)
        except Exception:  # noqa: BLE001 - the agent runs on without MCP tools; the next call retries
            log.exception("mcp_discovery_failed")

    async def reload(self) -> ReloadReport:
        """Reload user tools and the MCP server list; returns what loaded and what failed."""
        report = await asyncio.to_thread(self.reload_user_tools)
        statuses = await self.refresh_mcp()
        return dataclasses.replace(report, mcp=statuses)

    async def aclose(self) -> None:
        await self.mcp.aclose()

    # --- execution ----------------------------------------------------------------
    async def execute(self, name: str, args: Any, *, allowed: set[str] | None = None) -> ToolResult:
        """Run a tool for the model. Never raises for tool or argument problems (see module docstring)."""
        await atool_configs()  # refresh the admin switches before the checks
        tool = self.get(name)
        refusal = self._refusal(name, tool, allowed)
        if refusal is not None or tool is None:
            return ToolResult(success=False, error=refusal or f"unknown tool '{name}'")
        params, problem = execution.parse_args(args)
        if params is not None and problem is None:
            problem = execution.validate_args(name, tool.parameters, params)
        if problem is not None or params is None:
            return ToolResult(success=False, error=problem or "invalid arguments")
        result = await self._run(tool, params)
        return self._finish(tool, result)

    def doubt(self, name: str, args: dict[str, Any], request: str) -> Doubt | None:
        """The tool's own doubt about a call (``Tool.doubt``); a tool whose check fails is not doubted."""
        tool = self.get(name)
        if tool is None or not isinstance(args, dict):
            return None
        try:
            return tool.doubt(args, request)
        except Exception:  # noqa: BLE001 - a check, never a reason for a turn to fail
            log.warning("tool_doubt_failed", tool=name, exc_info=True)
            return None

    def looks(self, name: str, args: dict[str, Any]) -> bool:
        """The tool's own word on whether the call only looks (``Tool.looks``); an unknown tool, bad arguments or a
        failing check: it does not."""
        return self._says(name, args, "looks", otherwise=False)

    def changes(self, name: str, args: dict[str, Any]) -> bool:
        """The tool's own word on whether the call may change something (``Tool.changes``); an unknown tool, bad
        arguments or a failing check: it may."""
        return self._says(name, args, "changes", otherwise=True)

    def framing(self) -> tuple[str, ...]:
        """Every registered tool's own words around the user's (``Tool.framing``); a tool whose framing is no tuple of
        strings has none (logged)."""
        found: list[str] = []
        for name in self.names():
            words = getattr(self.get(name), "framing", ())
            if not isinstance(words, tuple | list) or not all(isinstance(w, str) for w in words):
                log.warning("tool_framing_invalid", tool=name)
                continue
            found.extend(w for w in words if w.strip())
        return tuple(dict.fromkeys(found))

    def named(self, request: str, among: Iterable[str]) -> list[tuple[str, str]]:
        """The tools of ``among`` that ``request`` (the user's words) names (``Tool.named_as``), in ``among``'s
        order, each with the words of the request that name it. A tool whose names cannot be read names nothing."""
        found: list[tuple[str, str]] = []
        for name in among:
            names = getattr(self.get(name), "named_as", ())
            if not isinstance(names, tuple | list):
                log.warning("tool_named_as_invalid", tool=name)  # a string would match letter by letter
                continue
            said = next((m for p in names if isinstance(p, str) and (m := _named_in(p, request))), None)
            if said is not None:
                found.append((name, said))
        return found

    def records(self, name: str, args: dict[str, Any]) -> bool:
        """The tool's own word on whether the call only keeps or finds words (``Tool.records``); an unknown tool,
        bad arguments or a failing check: it does not."""
        return self._says(name, args, "records", otherwise=False)

    def _says(self, name: str, args: dict[str, Any], word: str, *, otherwise: bool) -> bool:
        """What the tool's own check ``word`` (looks, changes, records) says of the call; ``otherwise`` when it
        cannot say: no such tool, arguments that are no object, or a check that fails."""
        tool = self.get(name)
        if tool is None or not isinstance(args, dict):
            return otherwise
        try:
            return bool(getattr(tool, word)(args))
        except Exception:  # noqa: BLE001 - a check, never a reason for a turn to fail
            log.warning(f"tool_{word}_failed", tool=name, exc_info=True)
            return otherwise

    def _refusal(self, name: str, tool: Tool | None, allowed: set[str] | None) -> str | None:
        available = [n for n in self.names() if allowed is None or n in allowed]
        if tool is None:
            return f"unknown tool '{name}'; available: {', '.join(available) or 'none'}"
        if allowed is not None and name not in allowed:
            # The turn leaves out tools the user may not run: say that, not "not enabled".
            problem = self._permission_problem(tool) if self._in_profile(name) else None
            return problem or f"tool '{name}' is not enabled for this profile; available: {', '.join(available) or 'none'}"
        if not is_enabled_globally(name):
            return f"tool '{name}' is disabled by an administrator; use another tool or tell the user"
        return self._permission_problem(tool)

    def _in_profile(self, name: str) -> bool:
        profile = current_profile.get()
        return profile is not None and name in self.tools_for_profile(getattr(profile, "enabled_tools", ()))

    def _permission_problem(self, tool: Tool) -> str | None:
        if not tool.dangerous or current_user_role.get() == "staff":
            return None
        if getattr(current_profile.get(), "allow_dangerous_tools_for_users", False) or allows_non_staff(tool.name):
            return None
        return (
            f"permission denied: '{tool.name}' can change or reach systems, so only staff users may run it. "
            "An administrator can allow it for all users of this profile (allow_dangerous_tools_for_users) "
            "or for this tool in the admin (Tool configurations → allow for non-staff). "
            "Tell the user; do not retry."
        )

    async def _run(self, tool: Tool, params: dict[str, Any]) -> ToolResult:
        started = time.monotonic()
        try:
            result = await asyncio.wait_for(tool.execute(params), timeout=tool.timeout)
        except TimeoutError:
            return ToolResult(success=False, error=f"tool {tool.name} timed out after {tool.timeout:g} s")
        except ToolError as exc:
            return ToolResult(success=False, error=str(exc) or type(exc).__name__)
        except Exception as exc:  # noqa: BLE001 - a bug in a tool is logged, the model gets a result
            log.exception("tool_crashed", tool=tool.name, session_id=current_session_id.get())
            return ToolResult(success=False, error=f"tool {tool.name} failed unexpectedly: {type(exc).__name__}: {exc}")
        finally:
            log.debug("tool_ran", tool=tool.name, ms=round((time.monotonic() - started) * 1000))
        if not isinstance(result, ToolResult):
            log.warning("tool_returned_non_result", tool=tool.name, type=type(result).__name__)
            result = ToolResult(success=True, output="" if result is None else str(result))
        return result

    def _finish(self, tool: Tool, result: ToolResult) -> ToolResult:
        output, cut = execution.cap_output(result.output or "", tool.max_output_chars)
        error = result.error
        if error is not None:
            error, _ = execution.cap_output(error, tool.max_output_chars)
        if tool.untrusted_output and output:
            output = execution.wrap_untrusted(tool.name, output)
        metadata = {**result.metadata, "truncated": True} if cut else result.metadata
        return dataclasses.replace(result, output=output, error=error, metadata=metadata)


# --- the process-wide registry ----------------------------------------------------

_hooks: list[ToolLike] = []
_default: ToolRegistry | None = None
_default_lock = threading.Lock()


def register_builtin(tool: ToolLike) -> ToolLike:
    """Make ``tool`` a builtin of the default registry (usable as a class decorator)."""
    with _default_lock:
        _hooks.append(tool)
        registry = _default
    if registry is not None:
        registry.register_builtin(tool)
    return tool


def _world_tools() -> list[ToolLike]:
    try:
        from tools_app.builtins import WORLD_TOOLS
    except ModuleNotFoundError as exc:
        if exc.name != "tools_app.builtins":
            log.exception("world_tools_import_failed")
        return []
    except Exception:  # noqa: BLE001 - the other builtins must still work
        log.exception("world_tools_import_failed")
        return []
    return list(WORLD_TOOLS)


def build_registry() -> ToolRegistry:
    """A registry with every builtin and the user tools (MCP discovery happens in ``ensure_mcp``)."""
    from tools_app.builtins_meta import META_TOOLS

    registry = ToolRegistry()
    for tool in [*_world_tools(), *META_TOOLS, *_hooks]:
        try:
            registry.register_builtin(tool)
        except Exception:  # noqa: BLE001
            log.exception("builtin_tool_failed", tool=repr(tool))
    registry.reload_user_tools()
    return registry


def get_registry() -> ToolRegistry:
    """The process-wide registry, built on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = build_registry()
        return _default


async def aget_registry() -> ToolRegistry:
    """The process-wide registry, MCP tools discovered and admin switches fresh; call it once per turn.

    The first call may wait for the MCP servers (each bounded by its connect timeout).
    """
    registry = await asyncio.to_thread(get_registry) if _default is None else get_registry()
    await registry.ensure_mcp()
    await atool_configs()
    return registry


def reset_registry() -> None:
    """Forget the process-wide registry (tests; the next get_registry() rebuilds it)."""
    global _default
    with _default_lock:
        _default = None


def _named_in(phrase: str, request: str) -> str | None:
    """The words of ``request`` that say ``phrase``: whole words, in any case, singular or plural, written apart,
    hyphenated or as one ("sub agent", "sub-agents", "Subagent"), and not part of a file name, a path or an
    address ("subagent.py", "docs/subagent/", "https://x/subagent")."""
    words = [re.escape(w) for w in re.split(r"[\s-]+", phrase.strip()) if w]
    if not words:
        return None
    found = re.search(r"(?<![\w/.\\-])" + r"[\s-]*".join(words) + r"s?(?![\w-]|[./\\]\w)", request, re.IGNORECASE)
    return found.group(0) if found else None
