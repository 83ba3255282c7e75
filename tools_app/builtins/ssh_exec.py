"""The ``ssh_exec`` tool: run a command on a named SSH host (staff only).

Only hosts named in SSH_HOSTS_FILE are reachable; host keys must match
SSH_KNOWN_HOSTS (unknown or changed keys are refused with instructions). A
connection pool keyed by (session id, host name) reuses connections within a
session; connections idle longer than SSH_IDLE_SECONDS are closed the next time
the pool is used, and ``close_session_connections`` closes a session's ones.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from django.conf import settings

from agent.ctx import current_session_id
from navi_site.config import env_value
from tools_app.base import Tool, ToolError, ToolResult
from tools_app.safety.permissions import require_staff
from tools_app.safety.ssh_hosts import SshHost, get_host, host_key_message, known_hosts_file

if TYPE_CHECKING:  # asyncssh (and cryptography) load on first use: ~30 MB less when SSH is unused
    import asyncssh

log = structlog.get_logger(__name__)

CONNECT_TIMEOUT = 15.0
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 300.0
MAX_OUTPUT = 50_000
HARD_OUTPUT = 2_000_000
PoolKey = tuple[str, str]


@dataclass(slots=True)
class Pooled:
    conn: asyncssh.SSHClientConnection
    loop: asyncio.AbstractEventLoop
    last_used: float = field(default_factory=time.monotonic)


class SshPool:
    """Open connections per (session id, host name); one event loop owns each connection."""

    def __init__(self) -> None:
        self._conns: dict[PoolKey, Pooled] = {}
        self._locks: dict[tuple[PoolKey, int], asyncio.Lock] = {}

    def entry(self, key: PoolKey) -> Pooled | None:
        return self._conns.get(key)

    def __len__(self) -> int:
        return len(self._conns)

    def _lock(self, key: PoolKey) -> asyncio.Lock:
        # An asyncio.Lock belongs to one event loop (tests run one loop per test).
        return self._locks.setdefault((key, id(asyncio.get_running_loop())), asyncio.Lock())

    def _usable(self, pooled: Pooled) -> bool:
        return pooled.loop is asyncio.get_running_loop() and not pooled.conn.is_closed()

    async def get(self, key: PoolKey, host: SshHost) -> asyncssh.SSHClientConnection:
        await self.reap_idle()
        async with self._lock(key):
            pooled = self._conns.get(key)
            if pooled is not None and self._usable(pooled):
                pooled.last_used = time.monotonic()
                return pooled.conn
            self._conns.pop(key, None)
            conn = await connect(host)
            self._conns[key] = Pooled(conn=conn, loop=asyncio.get_running_loop())
            log.info("ssh.connected", host=host.name, session_id=key[0])
            return conn

    def touch(self, key: PoolKey) -> None:
        pooled = self._conns.get(key)
        if pooled is not None:
            pooled.last_used = time.monotonic()

    async def close(self, key: PoolKey) -> None:
        pooled = self._conns.pop(key, None)
        if pooled is None:
            return
        if pooled.loop is asyncio.get_running_loop():
            pooled.conn.close()
            try:
                await asyncio.wait_for(pooled.conn.wait_closed(), timeout=5)
            except (TimeoutError, OSError):
                pass
        elif not pooled.loop.is_closed():
            pooled.loop.call_soon_threadsafe(pooled.conn.close)
        log.info("ssh.closed", host=key[1], session_id=key[0])

    async def reap_idle(self) -> int:
        """Close connections idle longer than SSH_IDLE_SECONDS; how many were closed."""
        limit = float(getattr(settings, "SSH_IDLE_SECONDS", 300))
        now = time.monotonic()
        stale = [k for k, p in self._conns.items() if now - p.last_used > limit or p.conn.is_closed()]
        for key in stale:
            await self.close(key)
        return len(stale)

    async def close_session(self, session_id: str) -> int:
        keys = [k for k in self._conns if k[0] == session_id]
        for key in keys:
            await self.close(key)
        return len(keys)


POOL = SshPool()


async def close_session_connections(session_id: str) -> int:
    """Close every pooled SSH connection of a session (e.g. when it is deleted); how many."""
    return await POOL.close_session(session_id)


def _auth(host: SshHost) -> dict[str, Any]:
    options: dict[str, Any] = {"agent_path": None}
    if host.key_file is not None:
        if not host.key_file.is_file():
            raise ToolError(f"The key file {host.key_file} for SSH host {host.name!r} does not exist.")
        options["client_keys"] = [str(host.key_file)]
    if host.password_env:
        # Like every setting: the environment first, then .env (the README says settings live there).
        dotenv = getattr(settings, "NAVI_DOTENV", None)
        password = env_value(host.password_env, Path(dotenv) if dotenv else None)
        if password is None:
            raise ToolError(f"SSH host {host.name!r} expects its password in {host.password_env}, which is set "
                            f"neither in the environment nor in {dotenv or '.env'}.")
        options["password"] = password
    return options


async def connect(host: SshHost) -> asyncssh.SSHClientConnection:
    import asyncssh

    """A new verified connection; ToolError with an actionable message on failure."""
    known = known_hosts_file()
    if not known.is_file():
        raise ToolError(
            f"The known_hosts file {known} (SSH_KNOWN_HOSTS) does not exist, so no host key can be verified. "
            f"Verify the server's key, then add it: ssh-keyscan -p {host.port} {host.host} >> {known}"
        )
    try:
        return await asyncio.wait_for(
            asyncssh.connect(host.host, host.port, username=host.username, known_hosts=str(known), config=None,
                             connect_timeout=CONNECT_TIMEOUT, **_auth(host)),
            timeout=CONNECT_TIMEOUT + 5,
        )
    except asyncssh.HostKeyNotVerifiable:
        raise ToolError(host_key_message(host)) from None
    except asyncssh.PermissionDenied:
        raise ToolError(f"SSH host {host.name!r} refused the login for user {host.username!r} (check the key).") from None
    except (TimeoutError, OSError, asyncssh.Error) as exc:
        raise ToolError(f"Could not connect to SSH host {host.name!r} ({host.host}:{host.port}): {exc}") from None


async def _read(stream: asyncssh.SSHReader[bytes], sink: bytearray, counter: list[int]) -> None:
    while chunk := await stream.read(65_536):
        counter[0] += len(chunk)
        room = MAX_OUTPUT - len(sink)
        if room > 0:
            sink += chunk[:room]
        if counter[0] > HARD_OUTPUT:
            return


async def run_command(conn: asyncssh.SSHClientConnection, command: str, limit: float) -> tuple[int | None, str, str, bool, list[int]]:
    """(exit status, stdout, stderr, timed out, [stdout bytes, stderr bytes])."""
    import asyncssh

    proc = await conn.create_process(command, stdin=asyncssh.DEVNULL, encoding=None)
    out, err = bytearray(), bytearray()
    sizes = [[0], [0]]
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.gather(_read(proc.stdout, out, sizes[0]), _read(proc.stderr, err, sizes[1])),
                               timeout=limit)
        completed = await asyncio.wait_for(proc.wait(), timeout=5)
        status = completed.exit_status
    except TimeoutError:
        timed_out, status = True, None
    finally:
        proc.close()
    return status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out, [s[0] for s in sizes]


def _format(name: str, status: int | None, stdout: str, stderr: str, timed_out: bool, sizes: list[int],
            timeout: float) -> str:
    lines = [f"[{name}] " + (f"timed out after {timeout:g} s (the remote command may still be running)"
                             if timed_out else f"exit status: {status}")]
    for label, text, total in (("stdout", stdout, sizes[0]), ("stderr", stderr, sizes[1])):
        if total:
            cut = f"\n[... {label} cut: {total - MAX_OUTPUT} more bytes not shown]" if total > MAX_OUTPUT else ""
            lines.append(f"--- {label} ---\n{text.rstrip()}{cut}")
    if not any(sizes):
        lines.append("(no output)")
    return "\n".join(lines)


class SshExecTool(Tool):
    name = "ssh_exec"
    description = (
        "Run a shell command on one of the configured SSH servers (by its name, e.g. 'web1') and get the "
        "exit status, stdout and stderr. Only hosts the admin configured can be used; the error message "
        "lists them. The connection stays open for the session, so consecutive calls are fast (but each "
        "command runs in a fresh shell: 'cd' does not carry over — use 'cd dir && cmd'). 'timeout' "
        "defaults to 60 s (max 300 s); output is cut at 50000 bytes per stream. Staff only."
    )
    parameters = {
        "type": "object",
        "properties": {
            "host": {"type": "string", "minLength": 1, "description": "Configured host name."},
            "command": {"type": "string", "minLength": 1, "description": "Shell command to run remotely."},
            "timeout": {"type": "number", "minimum": 1, "maximum": MAX_TIMEOUT, "description": "Seconds (default 60)."},
        },
        "required": ["host", "command"],
        "additionalProperties": False,
    }
    timeout = MAX_TIMEOUT + CONNECT_TIMEOUT + 10
    dangerous = True
    untrusted_output = False

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        import asyncssh

        require_staff("The ssh_exec tool")
        name, command = str(params.get("host") or ""), params.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("'command' is required.")
        host = get_host(name)
        key = (current_session_id.get() or "no-session", name)
        timeout = min(float(params.get("timeout") or DEFAULT_TIMEOUT), MAX_TIMEOUT)
        conn = await POOL.get(key, host)
        try:
            status, out, err, timed_out, sizes = await run_command(conn, command, timeout)
        except (asyncssh.Error, OSError) as exc:
            await POOL.close(key)
            raise ToolError(f"The command could not be run on {name!r}: {exc}") from None
        finally:
            POOL.touch(key)
        output = _format(name, status, out, err, timed_out, sizes, timeout)
        if timed_out or status != 0:
            return ToolResult(success=False, error="The remote command failed." if not timed_out
                              else "The remote command timed out.", output=output)
        return ToolResult(success=True, output=output)
