"""The ``terminal`` tool: run one allowlisted program without a shell (staff only).

Policy (details in ``tools_app.safety.commands``): the command line is split with
``shlex.split`` and executed with ``create_subprocess_exec`` — never a shell, so
pipes, redirections, ``;``/``&&``, globbing and ``$(...)`` are refused with a
message. Only programs in TERMINAL_ALLOWED_COMMANDS run; flags that would make an
allowed program run other programs (``find -exec``, ``git -c``...) are refused.
Working directory: the session directory. Environment: PATH, LANG, HOME (the
session directory) and settings that keep git from running pagers, editors and
hooks — none of Navi's secrets. Timeout 30 s by default (at most 120 s); the
whole process group is killed on timeout. Output is capped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from tools_app.base import Tool, ToolError, ToolResult
from tools_app.safety.commands import SAFE_PATH, parse_command
from tools_app.safety.paths import session_dir
from tools_app.safety.permissions import require_staff
from tools_app.safety.processes import format_result, run_limited

log = structlog.get_logger(__name__)

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 120.0
MAX_OUTPUT = 50_000
# Prepended to every git call: command-line config beats repository config, so a
# repository cannot make git run a pager, fsmonitor, hook or ext:: transport.
GIT_SAFETY = ["-c", "core.pager=cat", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
              "-c", "protocol.ext.allow=never", "-c", "core.editor=true", "-c", "sequence.editor=true",
              "-c", "diff.external=", "-c", "core.sshCommand=ssh -o BatchMode=yes"]


def minimal_env(home: Path) -> dict[str, str]:
    """The child's whole environment: nothing inherited from Navi's process."""
    return {
        "PATH": SAFE_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(home), "TERM": "dumb",
        "PAGER": "cat", "GIT_PAGER": "cat", "GIT_EDITOR": "true", "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ASKPASS": "true",
    }


class TerminalTool(Tool):
    name = "terminal"
    description = (
        "Run ONE program from the allowlist (like ls, cat, grep, find, git, df, ps) with arguments, in this "
        "session's working directory, and get its exit code, stdout and stderr. There is NO shell: pipes "
        "(|), redirections (>), ';', '&&', globbing (*.txt) and $(...) do not work — run one program per "
        "call and use the filesystem tool to write files. Flags that run other programs (find -exec, "
        "git -c, ...) are refused. 'timeout' defaults to 30 s (max 120 s); output is cut at 50000 bytes "
        "per stream. Staff only."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "Program and arguments, e.g. 'ls -la'."},
            "timeout": {"type": "number", "minimum": 1, "maximum": MAX_TIMEOUT, "description": "Seconds (default 30)."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    timeout = MAX_TIMEOUT + 10
    dangerous = True
    untrusted_output = False

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        require_staff("The terminal tool")
        command = params.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("'command' is required, e.g. 'ls -la'.")
        parsed = parse_command(command)
        argv = [parsed.executable, *parsed.argv[1:]]
        if Path(parsed.executable).name == "git":
            argv = [parsed.executable, *GIT_SAFETY, *parsed.argv[1:]]
        timeout = min(float(params.get("timeout") or DEFAULT_TIMEOUT), MAX_TIMEOUT)
        cwd = session_dir()
        log.info("terminal.run", argv=parsed.argv[:8])
        result = await run_limited(argv, cwd=cwd, env=minimal_env(cwd), time_limit=timeout, max_output=MAX_OUTPUT)
        output = f"$ {command}\n" + format_result(result, timeout=timeout, max_output=MAX_OUTPUT)
        if result.timed_out or result.returncode != 0:
            reason = "timed out" if result.timed_out else f"exit code {result.returncode}"
            return ToolResult(success=False, error=f"The command failed ({reason}).", output=output)
        return ToolResult(success=True, output=output)
