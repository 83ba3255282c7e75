"""The ``code_exec`` tool: run a Python snippet in a contained subprocess (staff only).

Containment, strongest available first (probed once per process, see ``sandbox_mode``):
- ``unshare --pid --fork --kill-child --net`` (util-linux, needs root): a new PID
  namespace — when the snippet's main process ends or is killed, the kernel kills
  every process in the namespace, double-forked daemons included — and a network
  namespace with no interfaces up (no network).
- As root, the snippet runs as ``nobody`` (RLIMIT_NPROC is only enforced for
  non-root users; files like Navi's secret key are unreadable to it).
- Always: its own session / process group (killed with SIGKILL at the end),
  rlimits (CPU seconds, address space, file size, process count, open files,
  no core dumps), a wall-clock timeout, a fresh temporary working directory
  (deleted afterwards), ``python -I`` and an explicit minimal environment (none of
  Navi's variables), output caps, and a sweep that kills any process still
  carrying this run's environment marker.
"""
from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import signal
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from django.conf import settings

from tools_app.base import Tool, ToolError, ToolResult
from tools_app.safety.commands import SAFE_PATH
from tools_app.safety.permissions import require_staff
from tools_app.safety.processes import ProcessResult, format_result, run_limited

log = structlog.get_logger(__name__)

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 120.0
MAX_OUTPUT = 50_000
MAX_CODE_CHARS = 200_000
MARKER_VAR = "NAVI_CODE_RUN"
UNSHARE = ("--pid", "--fork", "--kill-child", "--net", "--")
# Runs first inside the sandbox: limits, privilege drop, parent-death signal, then exec.
LAUNCHER = """
import ctypes, json, os, resource, signal, sys
cfg = json.loads(sys.argv[1])
for name, (soft, hard) in cfg["limits"].items():
    resource.setrlimit(getattr(resource, name), (soft, hard))
if cfg["uid"] is not None:
    os.setgroups([]); os.setgid(cfg["gid"]); os.setuid(cfg["uid"])
try:  # a uid change clears PR_SET_PDEATHSIG; set it again so unshare's death kills us
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
except Exception:
    pass
os.execv(cfg["python"], [cfg["python"], "-I", "main.py"])
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxMode:
    unshare: str | None
    uid: int | None
    gid: int | None
    python: str

    def describe(self) -> str:
        parts = ["PID+network namespace" if self.unshare else "process group only (no namespace; network NOT isolated)"]
        parts.append("runs as nobody" if self.uid is not None else "runs as the server user")
        return ", ".join(parts)


_MODE: SandboxMode | None = None


def _nobody() -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def _limits(timeout: float) -> dict[str, tuple[int, int]]:
    memory = int(getattr(settings, "CODE_EXEC_MEMORY_MB", 512)) * 1024 * 1024
    cpu = int(timeout) + 1
    return {
        "RLIMIT_CPU": (cpu, cpu + 1),
        "RLIMIT_AS": (memory, memory),
        "RLIMIT_FSIZE": (50 * 1024 * 1024, 50 * 1024 * 1024),
        "RLIMIT_NPROC": (64, 64),
        "RLIMIT_NOFILE": (256, 256),
        "RLIMIT_CORE": (0, 0),
    }


def _argv(mode: SandboxMode, timeout: float) -> list[str]:
    cfg = {"limits": _limits(timeout), "uid": mode.uid, "gid": mode.gid, "python": mode.python}
    inner = [sys.executable, "-I", "-c", LAUNCHER, json.dumps(cfg)]
    return [mode.unshare, *UNSHARE, *inner] if mode.unshare else inner


def _workdir(mode: SandboxMode, code: str) -> Path:
    work = Path(tempfile.mkdtemp(prefix="navi-code-"))
    (work / "main.py").write_text(code, encoding="utf-8")
    if mode.uid is not None and mode.gid is not None:
        os.chown(work, mode.uid, mode.gid)
    return work


def _env(work: Path, marker: str) -> dict[str, str]:
    return {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(work), "TMPDIR": str(work),
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", MARKER_VAR: marker}


async def _run(mode: SandboxMode, code: str, limit: float) -> ProcessResult:
    marker = uuid.uuid4().hex
    work = _workdir(mode, code)
    try:
        result = await run_limited(_argv(mode, limit), cwd=work, env=_env(work, marker), time_limit=limit,
                                   max_output=MAX_OUTPUT)
    finally:
        await asyncio.to_thread(kill_marked, marker)
        shutil.rmtree(work, ignore_errors=True)
    return result


def kill_marked(marker: str) -> int:
    """SIGKILL every process whose environment carries ``MARKER_VAR=marker``; how many were found."""
    needle = f"{MARKER_VAR}={marker}".encode()
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\x00"):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    if killed:
        log.warning("code_exec.stragglers_killed", count=killed)
    return killed


async def sandbox_mode() -> SandboxMode:
    """The strongest containment that works here (probed once with a trivial snippet)."""
    global _MODE
    if _MODE is not None:
        return _MODE
    nobody = _nobody()
    unshare = shutil.which("unshare", path=SAFE_PATH) if os.geteuid() == 0 else None
    # The server's interpreter may live where nobody cannot read it (e.g. under /root).
    pythons = list(dict.fromkeys(p for p in (sys.executable, shutil.which("python3", path=SAFE_PATH)) if p))
    candidates = []
    for uid, gid in ([nobody] if nobody else []) + [(None, None)]:
        for use_unshare in ([unshare] if unshare else []) + [None]:
            candidates += [SandboxMode(unshare=use_unshare, uid=uid, gid=gid, python=py) for py in pythons]
    candidates.sort(key=lambda m: (m.unshare is None, m.uid is None))
    for mode in candidates:
        result = await _run(mode, "print('sandbox-ok')", 10.0)
        if result.returncode == 0 and "sandbox-ok" in result.stdout:
            _MODE = mode
            break
        log.warning("code_exec.sandbox_unavailable", mode=mode.describe(), stderr=result.stderr[-500:])
    else:
        raise ToolError("Python code cannot be run on this server: the sandbox failed to start.")
    log.info("code_exec.sandbox", mode=_MODE.describe())
    return _MODE


class CodeExecTool(Tool):
    name = "code_exec"
    description = (
        "Run a Python 3 program and get its exit code, stdout and stderr (print what you want to see). "
        "Use it for calculations, data processing and quick experiments. Each run starts fresh in an "
        "empty temporary directory that is deleted afterwards (files do not persist; use the filesystem "
        "tool for that), without network access, with a memory limit (about 512 MB), a CPU/wall-clock "
        "limit ('timeout', default 30 s, max 120 s) and output cut at 50000 bytes per stream. Only the "
        "standard library and the server's installed packages are available. Background processes are "
        "killed when the program ends. Staff only."
    )
    parameters = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "minLength": 1, "description": "The Python source to run."},
            "timeout": {"type": "number", "minimum": 1, "maximum": MAX_TIMEOUT, "description": "Seconds (default 30)."},
        },
        "required": ["code"],
        "additionalProperties": False,
    }
    timeout = MAX_TIMEOUT + 15
    dangerous = True
    untrusted_output = False

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        require_staff("The code_exec tool")
        code = params.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ToolError("'code' is required: the Python program to run.")
        if len(code) > MAX_CODE_CHARS:
            raise ToolError(f"The program is {len(code)} characters; the limit is {MAX_CODE_CHARS}.")
        timeout = min(float(params.get("timeout") or DEFAULT_TIMEOUT), MAX_TIMEOUT)
        mode = await sandbox_mode()
        result = await _run(mode, code, timeout)
        output = format_result(result, timeout=timeout, max_output=MAX_OUTPUT)
        if not mode.unshare:
            output += f"\n[sandbox: {mode.describe()}]"
        if result.timed_out or result.returncode != 0:
            reason = "timed out" if result.timed_out else _exit_reason(result.returncode)
            return ToolResult(success=False, error=f"The program failed ({reason}).", output=output)
        return ToolResult(success=True, output=output)


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        hint = " (CPU time limit)" if name == "SIGXCPU" else " (killed)" if name == "SIGKILL" else ""
        return f"terminated by {name}{hint}"
    if code is not None and code > 128 and code - 128 in signal.Signals._value2member_map_:
        return f"terminated by {signal.Signals(code - 128).name}"
    return f"exit code {code}"
