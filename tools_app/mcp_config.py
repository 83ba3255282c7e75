"""MCP server configuration: ``MCP_SERVERS_FILE`` parsed into ``ServerSpec``s (see mcp_client)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONNECT_TIMEOUT = 15.0
CALL_TIMEOUT = 60.0
SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSpec:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    dangerous: bool = False
    connect_timeout: float = CONNECT_TIMEOUT
    call_timeout: float = CALL_TIMEOUT

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def client(self) -> Any:
        from mcp import Client, StdioServerParameters

        if self.url:
            return Client(self.url, read_timeout_seconds=self.call_timeout)
        params = StdioServerParameters(command=self.command or "", args=list(self.args), env=dict(self.env) or None)
        return Client(params, read_timeout_seconds=self.call_timeout)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerStatus:
    name: str
    transport: str
    available: bool
    reason: str = ""
    tools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "transport": self.transport, "available": self.available,
                "reason": self.reason, "tools": list(self.tools)}


# --- configuration ----------------------------------------------------------------

def _positive(value: object, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else default


def _parse_server(name: str, raw: object) -> ServerSpec | str:
    if not SERVER_NAME_RE.match(name):
        return f"server name {name!r}: use letters, digits, '-' and '_' (max 40)"
    if not isinstance(raw, dict):
        return f"server {name!r}: expected an object with \"command\" or \"url\""
    command, url = raw.get("command"), raw.get("url")
    if bool(command) == bool(url):
        return f"server {name!r}: give exactly one of \"command\" (stdio) or \"url\" (streamable HTTP)"
    if url and not (isinstance(url, str) and re.match(r"^https?://", url)):
        return f"server {name!r}: \"url\" must start with http:// or https://"
    args, env = raw.get("args", []), raw.get("env", {})
    if not isinstance(command or "", str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return f"server {name!r}: \"command\" must be a string and \"args\" a list of strings"
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return f"server {name!r}: \"env\" must map names to string values"
    return ServerSpec(
        name=name, command=command or None, args=tuple(args), env=tuple(sorted(env.items())), url=url or None,
        dangerous=bool(raw.get("dangerous", False)),
        connect_timeout=_positive(raw.get("connect_timeout"), CONNECT_TIMEOUT),
        call_timeout=_positive(raw.get("timeout"), CALL_TIMEOUT),
    )


def load_server_specs(path: Path) -> tuple[list[ServerSpec], list[str]]:
    """The configured servers and the configuration problems (a missing file = no servers)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [], []
    except (OSError, ValueError) as exc:
        return [], [f"{path.name} is not valid JSON: {exc}"]
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return [], [f"{path.name} must be an object with a \"servers\" object"]
    specs: list[ServerSpec] = []
    errors: list[str] = []
    for name, raw in servers.items():
        if isinstance(raw, dict) and raw.get("disabled"):
            continue
        parsed = _parse_server(str(name), raw)
        if isinstance(parsed, ServerSpec):
            specs.append(parsed)
        else:
            errors.append(parsed)
    return specs, errors


def tool_name(server: str, remote: str) -> str:
    """``mcp__<server>__<tool>``, restricted to the characters every LLM API accepts (max 64)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp__{server}__{remote}")[:64]
