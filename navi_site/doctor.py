"""`manage.py doctor` and the admin's Doctor page: check an installation and say how to fix it.

Each check returns findings (ok / warning / error, a message, and the fix). The checks run
concurrently, each in a daemon thread with its own time limit, so the whole report comes within
about ``CHECK_TIMEOUT`` seconds even when every service is unreachable (a check that does not
finish in time is reported as an error, and its thread is left behind, never waited for).
"""
from __future__ import annotations

import asyncio
import ipaddress
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from django.conf import settings

from navi_site import probes

Status = Literal["ok", "warning", "error"]
CHECK_TIMEOUT = 6.0  # seconds a check may take in all
NET_TIMEOUT = 3.0  # one connection attempt (SSH, MCP, model servers)
DISK_ERROR_BYTES = 200 * 1024 * 1024
DISK_WARNING_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    check: str
    status: Status
    message: str
    fix: str = ""


Check = Callable[[], list[Finding]]


# --- the checks --------------------------------------------------------------------------------------

def check_configuration() -> list[Finding]:
    from navi_site import config

    try:
        values = config.load()
    except config.ConfigError as exc:
        return [Finding(check="configuration", status="error", message=str(exc),
                        fix="Correct the variable in .env or the environment (see .env.example).")]
    found = [Finding(check="configuration", status="ok",
                     message=f"{settings.NAVI_MODE} mode; data directory {settings.DATA_DIR}")]
    if "*" in values["FS_ALLOWED_PATHS"]:
        found.append(Finding(check="configuration", status="warning",
                             message="FS_ALLOWED_PATHS=* lets the filesystem tool read and write anywhere.",
                             fix="List the directories it may use instead (FS_ALLOWED_PATHS=/home/me/notes,...)."))
    if "*" in values["TERMINAL_ALLOWED_COMMANDS"]:
        found.append(Finding(check="configuration", status="warning",
                             message="TERMINAL_ALLOWED_COMMANDS=* lets the terminal tool run any program.",
                             fix="List the commands it may run instead."))
    return found


def check_database() -> list[Finding]:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    result = probes.check_database_sync()
    if not result["ok"]:
        return [Finding(check="database", status="error", message=result["error"],
                        fix="Start the database server, or correct DATABASE_URL.")]
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:4]) + (" ..." if len(plan) > 4 else "")
        return [Finding(check="database", status="error",
                        message=f"{connection.vendor}: {len(plan)} migration(s) not applied ({names}).",
                        fix="Run `python manage.py migrate` (manage.py start does it too).")]
    return [Finding(check="database", status="ok", message=f"{connection.vendor}, every migration applied")]


def check_broker() -> list[Finding]:
    if settings.NAVI_MODE != "scale-out":
        return [Finding(check="broker and channel layer", status="ok",
                        message="in-process (embedded mode): nothing to reach")]

    async def both() -> list[dict[str, object]]:
        return list(await asyncio.gather(
            probes.check_redis(settings.REDIS_URL, what="broker", timeout=NET_TIMEOUT),
            probes.check_redis(probes.layer_redis_url(), what="channel layer", timeout=NET_TIMEOUT)))

    found = []
    for what, result in zip(("broker", "channel layer"), asyncio.run(both()), strict=True):
        if result["ok"]:
            found.append(Finding(check=what, status="ok", message="Redis answers"))
        else:
            found.append(Finding(check=what, status="error", message=str(result["error"]),
                                 fix="Start Redis, or correct REDIS_URL."))
    return found


def check_models() -> list[Finding]:
    from django.db import DatabaseError

    from navi_site import config

    found: list[Finding] = []
    try:
        uses = probes.active_model_uses()
    except DatabaseError:
        uses = [probes.ModelUse(backend="ollama", model="", profiles=(), uses_tools=False)]  # the default
        found.append(Finding(check="model", status="warning",
                             message="profiles unknown: the database is not ready (see database)",
                             fix="Fix the database first; the profiles' models are checked then."))
    extra = ("ollama",) + (("openai",) if config.env_value("OPENAI_BASE_URL") else ())
    servers, models = asyncio.run(probes.probe_models([u for u in uses if u.model], extra_backends=extra,
                                                      timeout=NET_TIMEOUT))
    used = {u.backend for u in uses}
    for server in servers:
        setting = probes.SERVER_SETTING.get(server.backend, "OLLAMA_HOST")
        if server.ok:
            found.append(Finding(check="model server", status="ok", message=f"{server.backend} at {server.url}"))
        else:
            needed = server.backend in used
            found.append(Finding(
                check="model server", status="error" if needed else "warning",
                message=server.error + ("" if needed else " (no active profile uses it)"),
                fix=f"Start the server, or point {setting} at it."))
    for report in models:
        use = report.use
        who = f"{use.model} ({use.backend}; profile{'s' if len(use.profiles) > 1 else ''} {', '.join(use.profiles)})"
        if not report.ok:
            if "model server is down" in report.error:
                continue  # said above
            found.append(Finding(check="model", status="error", message=report.error,
                                 fix=f"`ollama pull {use.model}`, or choose another model for the profile in the admin."
                                 if use.backend == "ollama" else "Serve that model, or change the profile's model."))
            continue
        caps = report.capabilities
        if caps is None:
            found.append(Finding(check="model", status="ok",
                                 message=f"{who} is served (capabilities are not reported by this server)"))
            continue
        tools, vision = "tools" in caps, "vision" in caps
        message = f"{who}: tools {'yes' if tools else 'no'}, vision {'yes' if vision else 'no'}"
        if use.uses_tools and not tools:
            found.append(Finding(check="model", status="warning",
                                 message=message + "; the profile has tools but the model has no native tool calls",
                                 fix="Navi falls back to constrained decisions (tool_calling=auto); for better "
                                     "results choose a model with tool support."))
        else:
            found.append(Finding(check="model", status="ok", message=message))
    return found


def check_ssh_hosts() -> list[Finding]:
    from tools_app.base import ToolError
    from tools_app.safety.ssh_hosts import hosts_file, known_hosts_file, load_hosts

    if not hosts_file().exists():
        return [Finding(check="SSH hosts", status="ok", message=f"none configured ({hosts_file()} does not exist)")]
    try:
        hosts = load_hosts()
    except ToolError as exc:
        return [Finding(check="SSH hosts", status="error", message=str(exc), fix=f"Correct {hosts_file()}.")]
    if not hosts:
        return [Finding(check="SSH hosts", status="ok", message="none configured")]
    known = known_hosts_file()
    matcher = None
    if known.is_file():
        import asyncssh

        matcher = asyncssh.read_known_hosts(str(known))
    found = []
    for host in hosts.values():
        target = f"SSH host {host.name!r} ({host.host}:{host.port})"
        scan = f"ssh-keyscan -p {host.port} {host.host} >> {known}"
        try:
            with socket.create_connection((host.host, host.port), timeout=NET_TIMEOUT) as sock:
                address = str(sock.getpeername()[0])
        except OSError as exc:
            found.append(Finding(check="SSH hosts", status="error",
                                 message=f"{target} is not reachable: {exc.strerror or exc}",
                                 fix="Check the host and port in the SSH hosts file, and that the server is up."))
            continue
        matches = matcher.match(host.host, address, host.port) if matcher is not None else None
        if not matches or not (matches[0] or matches[1]):
            found.append(Finding(check="SSH hosts", status="error",
                                 message=f"{target} is reachable but its host key is not in {known}, so "
                                         "ssh_exec will refuse it",
                                 fix=f"Verify the key fingerprint out of band, then: {scan}"))
            continue
        found.append(Finding(check="SSH hosts", status="ok", message=f"{target} reachable, host key known"))
    return found


def check_mcp_servers() -> list[Finding]:
    import httpx

    from tools_app.mcp_config import load_server_specs

    path = Path(settings.MCP_SERVERS_FILE)
    specs, errors = load_server_specs(path)
    found = [Finding(check="MCP servers", status="error", message=e, fix=f"Correct {path}.") for e in errors]
    if not specs and not errors:
        return [Finding(check="MCP servers", status="ok", message="none configured")]
    for spec in specs:
        if spec.url:
            try:
                httpx.get(spec.url, timeout=NET_TIMEOUT)  # any HTTP answer: something listens
            except httpx.HTTPError as exc:
                found.append(Finding(check="MCP servers", status="error",
                                     message=f"{spec.name}: {spec.url} is not reachable ({type(exc).__name__})",
                                     fix="Start the server, or correct its url in " + str(path)))
                continue
            found.append(Finding(check="MCP servers", status="ok", message=f"{spec.name}: {spec.url} answers"))
        elif spec.command and shutil.which(spec.command) is None:
            found.append(Finding(check="MCP servers", status="error",
                                 message=f"{spec.name}: the command {spec.command!r} is not found",
                                 fix=f"Install it or give its full path in {path}."))
        else:
            found.append(Finding(check="MCP servers", status="ok", message=f"{spec.name}: {spec.command} found"))
    return found


def check_tools_dir() -> list[Finding]:
    from tools_app.registry import get_registry

    tools_dir = Path(settings.TOOLS_DIR)
    if tools_dir.exists() and not tools_dir.is_dir():
        return [Finding(check="tools directory", status="error", message=f"{tools_dir} is not a directory",
                        fix="Move the file away or set TOOLS_DIR to a directory.")]
    probe_dir = tools_dir if tools_dir.exists() else tools_dir.parent
    if probe_dir.exists() and not _writable(probe_dir):
        return [Finding(check="tools directory", status="error", message=f"{probe_dir} is not writable",
                        fix="Give Navi's user write access, or set TOOLS_DIR elsewhere.")]
    report = get_registry().reload_user_tools()
    found = [Finding(check="tools directory", status="ok",
                     message=f"{tools_dir}: {len(report.loaded)} tool(s) loaded")]
    found += [Finding(check="tools directory", status="warning", message=f"{e.file}: {e.error}",
                      fix="Fix the file or remove it; the other tools work.") for e in report.errors]
    return found


def _writable(path: Path) -> bool:
    import os

    return os.access(path, os.W_OK | os.X_OK)


def check_disk() -> list[Finding]:
    data = Path(settings.DATA_DIR)
    usage = shutil.disk_usage(data)
    free = f"{usage.free / 1024 ** 3:.1f} GB free of {usage.total / 1024 ** 3:.1f} GB at {data}"
    if usage.free < DISK_ERROR_BYTES:
        return [Finding(check="disk space", status="error", message=free,
                        fix="Free space: turns, uploads and backups cannot be saved without it.")]
    if usage.free < DISK_WARNING_BYTES:
        return [Finding(check="disk space", status="warning", message=free,
                        fix="Free some space, or move NAVI_DATA_DIR to a bigger disk.")]
    return [Finding(check="disk space", status="ok", message=free)]


LOCAL_NAMES = {"localhost", "127.0.0.1", "[::1]", "::1"}


def _is_local(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    if host in LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_https() -> list[Finding]:
    public = [h for h in settings.ALLOWED_HOSTS if not _is_local(h)]
    if not _is_local(settings.NAVI_HOST):
        public.append(f"NAVI_HOST={settings.NAVI_HOST}")
    public_url = getattr(settings, "NAVI_PUBLIC_URL", "")
    if public_url and not _is_local(urlparse(public_url).hostname or ""):
        public.append(f"NAVI_PUBLIC_URL={public_url}")
    if not public:
        return [Finding(check="HTTPS and cookies", status="ok", message="reachable from this machine only")]
    found = []
    where = ", ".join(public)
    if settings.DEBUG:
        found.append(Finding(check="HTTPS and cookies", status="error",
                             message=f"DEBUG is on while Navi is reachable from other machines ({where}): "
                                     "error pages show settings and code",
                             fix="Set DEBUG=false."))
    if not settings.NAVI_SECURE_COOKIES:
        found.append(Finding(check="HTTPS and cookies", status="warning",
                             message=f"Navi is reachable from other machines ({where}) but its cookies are "
                                     "sent over plain HTTP too",
                             fix="Serve it behind a TLS proxy and set NAVI_SECURE_COOKIES=true."))
    if public_url.startswith("http://") and not _is_local(urlparse(public_url).hostname or ""):
        found.append(Finding(check="HTTPS and cookies", status="warning",
                             message=f"NAVI_PUBLIC_URL={public_url} is plain HTTP",
                             fix="Use an https:// address (links in e-mails and notifications use it)."))
    return found or [Finding(check="HTTPS and cookies", status="ok",
                             message=f"secure cookies on; reachable as {where}")]


CHECKS: tuple[tuple[str, Check], ...] = (
    ("configuration", check_configuration),
    ("database", check_database),
    ("broker and channel layer", check_broker),
    ("model servers and models", check_models),
    ("SSH hosts", check_ssh_hosts),
    ("MCP servers", check_mcp_servers),
    ("tools directory", check_tools_dir),
    ("disk space", check_disk),
    ("HTTPS and cookies", check_https),
)


# --- running them ------------------------------------------------------------------------------------

def _in_thread(name: str, check: Check, out: dict[str, list[Finding]]) -> None:
    from django.db import connections

    try:
        out[name] = check()
    except Exception as exc:  # noqa: BLE001 - a broken check is a finding, not a crash
        out[name] = [Finding(check=name, status="error", message=f"the check failed: {type(exc).__name__}: {exc}",
                             fix="Report this; the other checks are unaffected.")]
    finally:
        connections.close_all()  # this thread's own connections


def _settle_sqlite_journal() -> None:
    """Open a SQLite database once before the checks' threads do. On a new file each connection's
    ``PRAGMA journal_mode=WAL`` must upgrade its lock, and when two do it at once SQLite refuses one
    at once ("database is locked": the busy timeout does not apply to a lock upgrade that could
    deadlock), which reported a fresh install's database as unreachable. Once the file is in WAL
    mode, the pragma takes no lock."""
    from django.db import connections

    if connections["default"].vendor != "sqlite":
        return
    for _ in range(3):
        try:
            connections["default"].ensure_connection()
            break
        except Exception:  # noqa: BLE001 - the database check reports what is wrong
            connections["default"].close()
            time.sleep(0.05)
    connections["default"].close()


def run_checks(checks: tuple[tuple[str, Check], ...] = CHECKS, *, timeout: float = CHECK_TIMEOUT) -> list[Finding]:
    """Every check at once; each gets ``timeout`` seconds. Findings in the order of ``checks``."""
    out: dict[str, list[Finding]] = {}
    _settle_sqlite_journal()
    threads = [threading.Thread(target=_in_thread, args=(name, fn, out), name=f"doctor-{name}", daemon=True)
               for name, fn in checks]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    findings: list[Finding] = []
    for name, _ in checks:
        findings += out.get(name) or [Finding(
            check=name, status="error", message=f"no answer within {timeout:g} s",
            fix="Something this check reaches hangs; see the other findings and the service's logs.")]
    return findings


def worst(findings: list[Finding]) -> Status:
    statuses = {f.status for f in findings}
    return "error" if "error" in statuses else "warning" if "warning" in statuses else "ok"
