"""MCP servers as tools: ``mcp__<server>__<tool>`` (source "mcp").

Servers come from ``MCP_SERVERS_FILE``::

    {"servers": {
        "echo": {"command": "python", "args": ["server.py"], "env": {"K": "V"}},
        "web":  {"url": "http://127.0.0.1:9000/mcp", "dangerous": false, "timeout": 60}
    }}

Connection lifecycle (the SDK's ``Client`` is an anyio context manager that must
be entered and exited by the same task): each server gets one long-lived task
that enters ``Client`` and keeps it open; callers on the *same* event loop use
that client directly (requests are multiplexed by the SDK). The task closes the
connection after ``IDLE_SECONDS`` without calls, on ``aclose()``, or when a call
fails at the transport level; the next call reconnects. A caller on *another*
event loop (e.g. a Celery worker running ``asyncio.run``) gets a per-call
connection instead, because the long-lived one is bound to its loop. Connect,
list and call all have timeouts; a server that is down or cannot be started
makes its tools unavailable with the reason, never an exception.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import structlog
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tools_app.base import Tool, ToolError, ToolResult
from tools_app.mcp_config import (
    ServerSpec,
    ServerStatus,
    load_server_specs,
    tool_name,
)

log = structlog.get_logger(__name__)

IDLE_SECONDS = 300.0
_T = TypeVar("_T")


def describe_error(exc: BaseException) -> str:
    """A one-line reason; unwraps the exception groups anyio task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- one long-lived connection ------------------------------------------------------

class ConnectFailed(Exception):
    """The connection task could not connect (``cause`` says why) or has closed."""

    def __init__(self, cause: BaseException | None) -> None:
        super().__init__(describe_error(cause) if cause else "connection closed")
        self.cause = cause


class _Connection:
    """Owns a task that keeps ``Client`` entered until idle, closed, or broken."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.loop = asyncio.get_running_loop()
        self.last_used = time.monotonic()
        self._client: Any = None
        self._error: BaseException | None = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=f"mcp-connection:{spec.name}")

    @property
    def alive(self) -> bool:
        return not self._task.done() and not self._closing.is_set()

    async def _run(self) -> None:
        try:
            async with self.spec.client() as client:
                self._client = client
                self._ready.set()
                await self._hold()
        except Exception as exc:  # noqa: BLE001 - reported to callers as the unavailability reason
            self._error = exc
            log.info("mcp_connection_closed", server=self.spec.name, error=describe_error(exc))
        finally:
            self._client = None
            self._ready.set()

    async def _hold(self) -> None:
        while not self._closing.is_set():
            try:
                await asyncio.wait_for(self._closing.wait(), timeout=min(30.0, IDLE_SECONDS))
            except TimeoutError:
                if time.monotonic() - self.last_used > IDLE_SECONDS:
                    return

    async def client(self) -> Any:
        self.last_used = time.monotonic()
        await asyncio.wait_for(self._ready.wait(), timeout=self.spec.connect_timeout)
        if self._client is None:
            raise ConnectFailed(self._error)
        return self._client

    def close(self) -> None:
        self._closing.set()

    async def wait_closed(self) -> None:
        self.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout=10.0)
        except (TimeoutError, Exception):  # noqa: BLE001 - best effort on shutdown
            self._task.cancel()


# --- the manager ------------------------------------------------------------------

@dataclass(slots=True)
class McpManager:
    """Configured servers, their status, and the connections to them."""

    specs: dict[str, ServerSpec] = field(default_factory=dict)
    status: dict[str, ServerStatus] = field(default_factory=dict)
    config_errors: list[str] = field(default_factory=list)
    _conns: dict[str, _Connection] = field(default_factory=dict)
    # Connections told to close whose task may still be ending (stdio: the server process
    # is being shut down); aclose() awaits them so no task outlives its event loop.
    _retired: list[_Connection] = field(default_factory=list)

    def statuses(self) -> list[ServerStatus]:
        return [self.status[name] for name in sorted(self.status)]

    async def discover(self, path: Path) -> list[Tool]:
        """(Re)read the config file, connect to every server, and return their tools."""
        specs, errors = load_server_specs(path)
        new = {spec.name: spec for spec in specs}
        for name, conn in list(self._conns.items()):
            if new.get(name) != conn.spec:
                del self._conns[name]
                await self._retire(conn)
        self.specs, self.config_errors = new, errors
        self.status = {}
        found = await asyncio.gather(*(self._discover_one(spec) for spec in specs))
        return [tool for tools in found for tool in tools]

    async def _discover_one(self, spec: ServerSpec) -> list[Tool]:
        try:
            listed = await self._with_client(spec, _list_all_tools, seconds=spec.connect_timeout + spec.call_timeout)
        except Exception as exc:  # noqa: BLE001 - a down server is a status, not a crash
            reason = _unavailable_reason(spec, exc)
            self.status[spec.name] = ServerStatus(name=spec.name, transport=spec.transport, available=False,
                                                  reason=reason)
            log.warning("mcp_server_unavailable", server=spec.name, reason=reason)
            return []
        tools = [_make_tool(self, spec, item) for item in listed]
        self.status[spec.name] = ServerStatus(name=spec.name, transport=spec.transport, available=True,
                                              tools=tuple(sorted(t.name for t in tools)))
        return tools

    async def call(self, server: str, remote: str, args: dict[str, Any]) -> ToolResult:
        spec = self.specs.get(server)
        if spec is None:
            raise ToolError(f"MCP server '{server}' is not configured any more; call reload_tools")

        async def run(client: Any) -> Any:
            return await client.call_tool(remote, args, read_timeout_seconds=spec.call_timeout)

        try:
            result = await self._with_client(spec, run, seconds=spec.connect_timeout + spec.call_timeout)
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - protocol/transport failures become a tool error
            reason = _unavailable_reason(spec, exc)
            self._mark(spec, available=False, reason=reason)
            raise ToolError(f"MCP server '{server}' failed: {reason}") from exc
        self._mark(spec, available=True, reason="")
        return call_result_to_tool_result(result)

    def _mark(self, spec: ServerSpec, *, available: bool, reason: str) -> None:
        old = self.status.get(spec.name)
        if old is not None and (old.available, old.reason) != (available, reason):
            self.status[spec.name] = ServerStatus(name=spec.name, transport=spec.transport, available=available,
                                                  reason=reason, tools=old.tools)

    async def _with_client(self, spec: ServerSpec, fn: Callable[[Any], Awaitable[_T]], *, seconds: float) -> _T:
        conn = self._connection(spec)
        if conn is None:  # another event loop owns the long-lived connection: one-off connection
            async def one_off() -> _T:
                async with spec.client() as client:
                    return await fn(client)

            return await asyncio.wait_for(one_off(), timeout=seconds)
        try:
            client = await conn.client()
            return await asyncio.wait_for(fn(client), timeout=seconds)
        except Exception as exc:
            if not _is_protocol_error(exc):  # transport trouble: reconnect on the next call
                conn.close()
                self._conns.pop(spec.name, None)
                self._retired.append(conn)
            raise

    def _connection(self, spec: ServerSpec) -> _Connection | None:
        loop = asyncio.get_running_loop()
        conn = self._conns.get(spec.name)
        if conn is not None and conn.loop is not loop:
            if not conn.loop.is_closed():
                return None
            conn = None
        if conn is None or not conn.alive:
            conn = self._conns[spec.name] = _Connection(spec)
        return conn

    async def aclose(self) -> None:
        """Close the connections owned by the running event loop (others are told to close)."""
        conns, self._conns = list(self._conns.values()), {}
        retired, self._retired = self._retired, []
        for conn in conns + retired:
            await self._retire(conn)

    async def _retire(self, conn: _Connection) -> None:
        """Close a connection; one of this event loop is awaited until its task has ended."""
        if conn.loop is asyncio.get_running_loop():
            await conn.wait_closed()
        elif not conn.loop.is_closed():
            conn.loop.call_soon_threadsafe(conn.close)


def _is_protocol_error(exc: BaseException) -> bool:
    from mcp import MCPError

    return isinstance(exc, MCPError)


def _unavailable_reason(spec: ServerSpec, exc: BaseException) -> str:
    if isinstance(exc, ConnectFailed) and exc.cause is not None:
        exc = exc.cause
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return f"no answer within {spec.connect_timeout + spec.call_timeout:g} s"
    if isinstance(exc, FileNotFoundError | PermissionError) and spec.command:
        what = "command not found" if isinstance(exc, FileNotFoundError) else "permission denied"
        return f"cannot start {spec.command!r}: {what}"
    if spec.url and not _is_protocol_error(exc):
        return f"cannot reach {spec.url}: {describe_error(exc)}"
    return describe_error(exc)


async def _list_all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(20):  # pages
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


# --- tools --------------------------------------------------------------------------

class McpTool(Tool):
    """Base of the per-tool classes built from a server's listing."""

    source = "mcp"
    untrusted_output = True  # third-party servers relay outside data
    _manager: McpManager
    _server: str
    _remote: str

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        result = await self._manager.call(self._server, self._remote, params)
        # Third-party content: it taints the turn (approvals_app's exfiltration guard).
        return dataclasses.replace(result, metadata={**result.metadata, "untrusted_source": f"MCP server {self._server}"})


def _schema(raw: Any) -> dict[str, Any]:
    schema = dict(raw) if isinstance(raw, dict) else {}
    schema.setdefault("type", "object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return {"type": "object"}
    return schema


def _make_tool(manager: McpManager, spec: ServerSpec, item: Any) -> Tool:
    name = tool_name(spec.name, item.name)
    description = (item.description or item.name).strip()
    attrs = {
        "name": name, "description": f"[MCP server '{spec.name}'] {description}",
        "parameters": _schema(item.input_schema), "timeout": spec.connect_timeout + spec.call_timeout + 1,
        "dangerous": spec.dangerous, "_manager": manager, "_server": spec.name, "_remote": item.name,
    }
    return type(f"McpTool_{name}", (McpTool,), attrs)()


def call_result_to_tool_result(result: Any) -> ToolResult:
    """Text of an MCP ``CallToolResult``; ``is_error`` becomes a ToolError the model sees."""
    from mcp_types import EmbeddedResource, ImageContent, ResourceLink, TextContent, TextResourceContents

    parts: list[str] = []
    metadata: dict[str, Any] = {}
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image {block.mime_type}]")
            metadata.setdefault("is_image", True)
            metadata.setdefault("base64", block.data)
            metadata.setdefault("mime", block.mime_type)
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource {block.uri}]")
        elif isinstance(block, EmbeddedResource):
            res = block.resource
            parts.append(res.text if isinstance(res, TextResourceContents) else f"[binary resource {res.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} content]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    if result.is_error:
        raise ToolError(text or "the MCP tool reported an error")
    return ToolResult(success=True, output=text, metadata=metadata)
