"""Tools about tools: ``reload_tools``, ``list_tools``, ``tool_manual``, ``test_tool``, ``mcp_status``, ``find_tools``."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings

from agent.domains import TOOLS, close_domains
from tools_app.base import Tool, ToolError, ToolResult

if TYPE_CHECKING:
    from tools_app.registry import ToolRegistry


class RegistryTool(Tool):
    """A tool that works on the registry it is registered in."""

    _registry: ToolRegistry | None = None

    def bind_registry(self, registry: ToolRegistry) -> None:
        self._registry = registry

    @property
    def registry(self) -> ToolRegistry:
        # Bound by ToolRegistry.register_builtin: a meta tool always works on the registry that
        # holds it (importing the default one here would make registry and meta tools a circle).
        if self._registry is None:
            raise RuntimeError(f"{self.name} is not registered in a tool registry")
        return self._registry


class ReloadToolsTool(RegistryTool):
    name: ClassVar[str] = "reload_tools"
    description: ClassVar[str] = (
        "Reload the user tools from the tools directory and reconnect the MCP servers, without a restart. "
        "Reports which tools loaded and which files failed (with the error). Built-in tools are unaffected."
    )
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    timeout: ClassVar[float] = 120.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        report = await self.registry.reload()
        return ToolResult(success=True, output=report.summary())


def _first_line(text: str, limit: int = 140) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


class ListToolsTool(RegistryTool):
    name: ClassVar[str] = "list_tools"
    description: ClassVar[str] = (
        "List every tool Navi has right now (built-in, user and MCP) with its status: ok, disabled, "
        "unavailable (with the reason) or error (a user tool file that failed to load, with the error). "
        "Optionally filter by 'source'. Use tool_manual for how to use one tool."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"source": {"type": "string", "enum": ["builtin", "user", "mcp"],
                                  "description": "Only tools of this origin."}},
    }
    timeout: ClassVar[float] = 10.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        rows = [r for r in self.registry.all() if params.get("source") in (None, r.source)]
        lines = []
        for row in rows:
            flags = " (staff only)" if row.dangerous else ""
            state = row.status if row.status == "ok" else f"{row.status.upper()}: {row.detail}"
            about = f" — {_first_line(row.description)}" if row.description else ""
            lines.append(f"- {row.name} [{row.source}] {state}{flags}{about}")
        return ToolResult(success=True, output="\n".join(lines) or "No tools match.")


def manuals_dir() -> Path:
    return Path(getattr(settings, "TOOL_MANUALS_DIR", Path(settings.BASE_DIR) / "manuals"))


def _param_line(name: str, spec: dict[str, Any], required: bool) -> str:
    kind = spec.get("type", "any")
    if kind == "array" and isinstance(spec.get("items"), dict) and spec["items"].get("type"):
        kind = f"array of {spec['items']['type']}"
    parts = [f"- `{name}` ({kind}{', required' if required else ''})"]
    if spec.get("description"):
        parts.append(f": {spec['description']}")
    if isinstance(spec.get("enum"), list):
        parts.append(f" One of: {', '.join(str(v) for v in spec['enum'])}.")
    if "default" in spec:
        parts.append(f" Default: {spec['default']!r}.")
    return "".join(parts)


def generated_manual(tool: Tool) -> str:
    """A manual from the tool's schema: description and every parameter."""
    schema = tool.parameters or {}
    props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
    required = set(schema.get("required", []))
    lines = [f"# {tool.name}", "", f"Source: {tool.source}." + (" Staff only (dangerous)." if tool.dangerous else ""),
             "", tool.description.strip(), "", "## Parameters"]
    lines += [_param_line(n, s if isinstance(s, dict) else {}, n in required) for n, s in props.items()] or ["None."]
    return "\n".join(lines)


class ToolManualTool(RegistryTool):
    name: ClassVar[str] = "tool_manual"
    description: ClassVar[str] = (
        "Read the manual of one tool: how to use it, its limits and its safety rules. Use it before the "
        "first call of an unfamiliar or powerful tool (terminal, ssh_exec, code_exec, filesystem, ...)."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The tool's name, e.g. terminal."}},
        "required": ["name"],
    }
    timeout: ClassVar[float] = 10.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        tool = self.registry.get(params["name"])
        if tool is None:
            raise ToolError(f"unknown tool '{params['name']}'; available: {', '.join(self.registry.names())}")
        path = manuals_dir() / f"{tool.name}.md"  # the name is a registered tool name, never a path
        if path.is_file():
            return ToolResult(success=True, output=path.read_text(encoding="utf-8"))
        return ToolResult(success=True, output=generated_manual(tool))


class TestToolTool(RegistryTool):
    __test__ = False  # not a pytest test class
    name: ClassVar[str] = "test_tool"
    description: ClassVar[str] = (
        "Run a user tool once with the given 'arguments' and report whether it succeeded, its output or error, "
        "and how long it took. Use it right after write_tool to check a new tool before relying on it."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The user tool to run."},
            "arguments": {"type": "object", "description": "Arguments for the tool, as a JSON object."},
        },
        "required": ["name"],
    }
    timeout: ClassVar[float] = 180.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        name = params["name"]
        tool = self.registry.get(name)
        if tool is None or tool.source != "user":
            broken = [e for e in self.registry.load_errors if Path(e.file).stem == name]
            if broken:
                raise ToolError(f"user tool '{name}' did not load: {broken[0].file}: {broken[0].error}")
            users = sorted(n for n in self.registry.names() if (t := self.registry.get(n)) and t.source == "user")
            raise ToolError(f"'{name}' is not a user tool; user tools: {', '.join(users) or 'none'}")
        started = time.monotonic()
        result = await self.registry.execute(name, params.get("arguments") or {})
        ms = round((time.monotonic() - started) * 1000)
        if result.success:
            return ToolResult(success=True, output=f"test_tool: '{name}' succeeded in {ms} ms.\nOutput:\n{result.output}")
        report = f"test_tool: '{name}' FAILED in {ms} ms.\nError: {result.error}"
        if result.output:
            report += f"\nOutput:\n{result.output}"
        return ToolResult(success=False, error=f"'{name}' failed: {result.error}", output=report)


class McpStatusTool(RegistryTool):
    name: ClassVar[str] = "mcp_status"
    description: ClassVar[str] = (
        "Show the configured MCP servers: whether each is reachable, its tools (named mcp__<server>__<tool>), "
        "or why it is unavailable. Pass refresh=true to reconnect and list the tools again."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"refresh": {"type": "boolean", "description": "Reconnect to every server first."}},
    }
    timeout: ClassVar[float] = 120.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        registry = self.registry
        if params.get("refresh"):
            await registry.refresh_mcp()
        else:
            await registry.ensure_mcp()
        lines = [f"- config error: {e}" for e in registry.mcp.config_errors]
        for server in registry.mcp.statuses():
            if server.available:
                lines.append(f"- {server.name} ({server.transport}): connected, {len(server.tools)} tools: "
                             f"{', '.join(server.tools) or 'none'}")
            else:
                lines.append(f"- {server.name} ({server.transport}): UNAVAILABLE: {server.reason}")
        if not lines:
            return ToolResult(success=True, output=f"No MCP servers are configured ({registry.mcp_file.name}).")
        return ToolResult(success=True, output="MCP servers:\n" + "\n".join(lines))


class FindToolsTool(RegistryTool):
    """Tools offered on demand (``agent.toolplan``): a profile whose prompt budget cannot hold every
    tool definition lists the rest in this tool's description, and a call loads them."""

    name: ClassVar[str] = "find_tools"
    description: ClassVar[str] = (
        "Load the full definitions of tools that are not in your tool list yet, so you can call them. "
        "Give their names, or words for what you need done."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "names": {"type": "array", "items": {"type": "string"}, "description": "Tool names to load."},
            "query": {"type": "string", "description": "Words for what you need done, if you do not know the names."},
        },
    }
    timeout: ClassVar[float] = 10.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        from agent.ctx import current_profile

        profile = current_profile.get()
        offered = self.registry.tools_for_profile(profile.enabled_tools) if profile is not None else self.registry.names()
        offered = [n for n in offered if n != self.name and self.registry.can_use(n)]
        wanted = [n for n in params.get("names") or [] if isinstance(n, str)]
        found = [n for n in wanted if n in offered]
        if params.get("query"):
            found += [n for n in _matching(str(params["query"]), offered, self.registry) if n not in found]
        if not found:
            unknown = f" ({', '.join(map(repr, wanted))} not among them)" if wanted else ""
            raise ToolError(f"no tool matches{unknown}; the tools of this profile are: {', '.join(offered)}")
        definitions = [json.dumps(s["function"], ensure_ascii=False)
                       for s in close_domains(self.registry.schemas(found), {TOOLS: offered})]
        return ToolResult(success=True, output="You can call these tools now:\n" + "\n".join(definitions),
                          metadata={"loaded_tools": found})


def _matching(query: str, names: list[str], registry: ToolRegistry) -> list[str]:
    """Tools whose name or description shares a word (4+ letters) with ``query``, best first."""
    words = {w for w in re.findall(r"[a-z]{4,}", query.lower())}
    scored = []
    for name in names:
        tool = registry.get(name)
        text = f"{name.replace('_', ' ')} {tool.description if tool is not None else ''}".lower()
        score = sum(1 for w in words if w in text)
        if score:
            scored.append((-score, name))
    return [n for _, n in sorted(scored)[:5]]
