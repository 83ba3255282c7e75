"""Running a subprocess with a wall-clock timeout, output caps and whole-group cleanup.

The child starts in its own session (``start_new_session=True``) so that it and
everything it forks (unless it calls setsid itself) share one process group,
which is killed with SIGKILL on timeout and again after the run, so no
background child survives. Processes that escape the group are the caller's
concern (code_exec uses a PID namespace and an environment marker for that).
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

READ_CHUNK = 65_536


@dataclass(slots=True, kw_only=True)
class Captured:
    data: bytearray
    total: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessResult:
    returncode: int | None
    stdout: str
    stderr: str
    stdout_total: int
    stderr_total: int
    timed_out: bool
    output_limit_hit: bool
    duration: float


async def _pump(stream: asyncio.StreamReader, into: Captured, cap: int, hard_cap: int, over: asyncio.Event) -> None:
    while chunk := await stream.read(READ_CHUNK):
        into.total += len(chunk)
        room = cap - len(into.data)
        if room > 0:
            into.data += chunk[:room]
        if into.total > hard_cap:
            over.set()
            return


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def run_limited(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    time_limit: float,
    max_output: int,
    hard_output: int | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> ProcessResult:
    """Run ``argv`` without a shell; keep the first ``max_output`` bytes of stdout and stderr each.

    Output past ``hard_output`` (default 20 x max_output) ends the run: the group is killed.
    """
    hard = hard_output or max_output * 20
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=str(cwd), env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True, preexec_fn=preexec_fn,
    )
    out, err, over = Captured(data=bytearray()), Captured(data=bytearray()), asyncio.Event()
    assert proc.stdout is not None and proc.stderr is not None
    pumps = asyncio.gather(_pump(proc.stdout, out, max_output, hard, over), _pump(proc.stderr, err, max_output, hard, over))
    over_wait = asyncio.ensure_future(over.wait())
    timed_out = False
    try:
        done, _ = await asyncio.wait({asyncio.ensure_future(proc.wait()), over_wait}, timeout=time_limit,
                                     return_when=asyncio.FIRST_COMPLETED)
        timed_out = not done
    finally:
        over_wait.cancel()
        kill_group(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        try:
            await asyncio.wait_for(pumps, timeout=2.0)
        except TimeoutError:  # a grandchild outside the group still holds the pipe open
            pumps.cancel()
    log.info("subprocess.finished", program=argv[0], returncode=proc.returncode, timed_out=timed_out)
    return ProcessResult(
        returncode=proc.returncode, stdout=out.data.decode("utf-8", errors="replace"),
        stderr=err.data.decode("utf-8", errors="replace"), stdout_total=out.total, stderr_total=err.total,
        timed_out=timed_out, output_limit_hit=over.is_set(), duration=time.monotonic() - started,
    )


def format_result(result: ProcessResult, *, timeout: float, max_output: int) -> str:
    """The text the model sees: exit status, notes, stdout, stderr."""
    lines: list[str] = []
    if result.timed_out:
        lines.append(f"[timed out after {timeout:g} s; the process and its children were killed]")
    elif result.output_limit_hit:
        lines.append("[the process printed too much output and was stopped]")
    else:
        lines.append(f"exit code: {result.returncode}")
    for label, text, total in (("stdout", result.stdout, result.stdout_total),
                               ("stderr", result.stderr, result.stderr_total)):
        if not total:
            continue
        cut = f"\n[... {label} cut: {total - max_output} more bytes not shown]" if total > max_output else ""
        lines.append(f"--- {label} ---\n{text.rstrip()}{cut}")
    if not result.stdout_total and not result.stderr_total:
        lines.append("(no output)")
    return "\n".join(lines)
