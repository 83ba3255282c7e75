"""code_exec: resource limits, no secrets, no network, no surviving processes, staff only."""
from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from agent.ctx import current_user_role
from tools_app.base import ToolError
from tools_app.builtins.code_exec import MARKER_VAR, CodeExecTool, sandbox_mode

code = CodeExecTool()


def processes_with(needle: bytes, file: str) -> list[int]:
    """pids whose /proc/<pid>/<file> contains needle (psutil-free scan)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / file).read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _exists(path: str) -> bool:
    return Path(path).exists()


def _can_fork() -> bool:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return os.waitpid(pid, 0)[1] == 0


async def run(source: str, limit: float = 3):
    return await code.execute({"code": source, "timeout": limit})


async def test_runs_python_and_cleans_its_directory(tool_ctx) -> None:
    result = await run("import os\nprint('sum', 2 + 3)\nprint(os.getcwd())")
    assert result.success, result.output
    assert "sum 5" in result.output
    workdir = result.output.split("--- stdout ---\n", 1)[1].splitlines()[1]
    assert workdir.startswith("/") and not _exists(workdir)


async def test_error_exit_is_reported(tool_ctx) -> None:
    result = await run("raise SystemExit(3)")
    assert not result.success and "exit code 3" in (result.error or "")
    result = await run("1/0")
    assert "ZeroDivisionError" in result.output


async def test_staff_only(tool_ctx) -> None:
    current_user_role.set("user")
    with pytest.raises(ToolError, match="only available to staff users"):
        await run("print(1)")


async def test_infinite_loop_hits_the_time_limit(tool_ctx) -> None:
    started = time.monotonic()
    result = await run("while True:\n    pass", limit=2)
    assert time.monotonic() - started < 5
    assert not result.success and "timed out after 2 s" in result.output


async def test_huge_allocation_fails_with_memory_error(tool_ctx) -> None:
    result = await run("data = bytearray(10 * 1024**3)\nprint('allocated')")
    assert not result.success and "MemoryError" in result.output and "allocated" not in result.output


async def test_environment_has_no_secrets(tool_ctx, monkeypatch) -> None:
    monkeypatch.setenv("SECRET_KEY", "code-exec-test-secret")
    result = await run("import os\nprint(sorted(os.environ))\nprint(os.environ.get('SECRET_KEY'))")
    assert "code-exec-test-secret" not in result.output
    assert "'PATH'" in result.output and "SECRET_KEY" not in result.output


async def test_cannot_read_the_parent_environment(tool_ctx, monkeypatch) -> None:
    monkeypatch.setenv("SECRET_KEY", "code-exec-parent-secret")
    mode = await sandbox_mode()
    if mode.uid is None:
        pytest.skip("the sandbox runs as the server user here (not root), so /proc/<parent>/environ is readable")
    result = await run(f"print(open('/proc/{os.getpid()}/environ', 'rb').read())")
    assert "code-exec-parent-secret" not in result.output and "PermissionError" in result.output


async def test_no_network(tool_ctx, http_server) -> None:
    mode = await sandbox_mode()
    if not mode.unshare:
        pytest.skip("util-linux unshare with namespaces is not available (needs root); network is not isolated")
    result = await run(
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {http_server.port}), timeout=1)\n    print('CONNECTED')\n"
        "except OSError as exc:\n    print('blocked', exc)"
    )
    assert "blocked" in result.output and "CONNECTED" not in result.output


async def test_fork_bomb_is_contained(tool_ctx) -> None:
    started = time.monotonic()
    result = await run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", limit=2)
    assert time.monotonic() - started < 8
    assert not result.success and "timed out" in result.output
    await asyncio.sleep(0.2)
    assert processes_with(f"{MARKER_VAR}=".encode(), "environ") == []
    assert _can_fork()  # the test process is unharmed


async def test_double_forked_daemon_does_not_survive(tool_ctx) -> None:
    marker = f"navi-daemon-{uuid.uuid4().hex}"
    source = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "print('parent done')\n"
    )
    result = await run(source)
    assert "parent done" in result.output
    await asyncio.sleep(0.3)
    assert processes_with(marker.encode(), "cmdline") == []


async def test_file_size_limit(tool_ctx) -> None:
    result = await run("open('big.bin', 'wb').write(b'x' * (80 * 1024 * 1024))\nprint('wrote')")
    assert not result.success and "wrote" not in result.output
    assert "File too large" in result.output or "EFBIG" in result.output or "SIGXFSZ" in (result.error or "")


async def test_output_is_capped(tool_ctx) -> None:
    result = await run("print('z' * 200_000)")
    assert "[... stdout cut:" in result.output and len(result.output) < 60_000


def test_socket_module_still_works_here() -> None:
    """Sanity: nothing above changed the test process."""
    socket.socket().close()
