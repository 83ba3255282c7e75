"""llama-cpp-python's OpenAI-compatible server in its own venv: build, start, stop, status.

The server gets a dedicated virtualenv inside the cache (it pins its own numpy,
fastapi, ...; Navi's venv stays untouched). It runs in the background on
loopback with a pid file; ``stop`` only signals a process whose command line is
really our server, so a stale pid file never kills an unrelated process.
"""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_models.catalog import SERVER_CMAKE_ARGS, SERVER_PACKAGE, SERVER_VERSION, ModelSpec

Echo = Callable[[str], None]
HEARTBEAT_SECONDS = 30.0
LAUNCHER = Path(__file__).with_name("llama_serve.py")
DEFAULT_MAX_TOKENS = 1024
PROMPT_SLOTS = 3  # conversations whose evaluated prompt the server keeps aside (``llama_serve.py``)
PROGRESS_EVERY = 10.0
_PROGRESS = re.compile(r"^\s*\[\s*\d+(?:/\d+|%)\]")
_NOTABLE = re.compile(r"(?i)(error|warning: .*fail|successfully|collecting|building wheel|installing)")


class ServerError(Exception):
    """The server could not be built, started or stopped; the message says what to do."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Paths:
    cache: Path

    @property
    def venv(self) -> Path:
        return self.cache / "server-venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def pid_file(self) -> Path:
        return self.cache / "server.pid"

    @property
    def log(self) -> Path:
        return self.cache / "server.log"

    @property
    def build_log(self) -> Path:
        return self.cache / "build.log"


# -- build ---------------------------------------------------------------------------------


def installed_version(paths: Paths) -> str | None:
    if not paths.python.exists():
        return None
    probe = subprocess.run([str(paths.python), "-c", "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)"],
                           capture_output=True, text=True, timeout=120)
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_server(paths: Paths, *, echo: Echo = print) -> None:
    """A venv with llama-cpp-python[server] at the pinned version (built once, ~9 min on 2 cores)."""
    if installed_version(paths) == SERVER_VERSION:
        echo(f"server: llama-cpp-python {SERVER_VERSION} in {paths.venv} (reused)")
        return
    if not paths.python.exists():
        echo(f"server: creating the venv {paths.venv}")
        subprocess.run([sys.executable, "-m", "venv", str(paths.venv)], check=True, timeout=300)
    echo(f"server: building {SERVER_PACKAGE} from source (about 9 minutes on 2 cores; full log in {paths.build_log})")
    env = {**os.environ, "CMAKE_ARGS": SERVER_CMAKE_ARGS, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    cmd = [str(paths.python), "-m", "pip", "install", "-v", "--progress-bar", "off", SERVER_PACKAGE]
    code, tail = run_with_progress(cmd, env=env, log=paths.build_log, echo=echo)
    if code != 0 or installed_version(paths) != SERVER_VERSION:
        raise ServerError(
            f"building {SERVER_PACKAGE} failed (exit {code}). It needs a C/C++ compiler and cmake "
            f"(Debian: apt install build-essential cmake). Last lines of {paths.build_log}:\n" + "\n".join(tail))
    echo(f"server: llama-cpp-python {SERVER_VERSION} installed")


def run_with_progress(cmd: list[str], *, env: dict[str, str], log: Path, echo: Echo,
                      heartbeat: float = HEARTBEAT_SECONDS) -> tuple[int, list[str]]:
    """Run ``cmd``; echo notable lines and throttled build progress with the elapsed time,
    and a heartbeat line when nothing was shown for ``heartbeat`` seconds. Returns (exit code, last lines)."""
    start = time.monotonic()
    lines: queue.Queue[str | None] = queue.Queue()
    tail: deque[str] = deque(maxlen=40)
    with log.open("w") as log_fh:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        last_shown = last_progress = start
        while True:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                line = ""
            now = time.monotonic()
            stamp = f"[{int(now - start) // 60:02d}:{int(now - start) % 60:02d}]"
            if line is None:
                break
            if line:
                log_fh.write(line + "\n")
                tail.append(line)
                if _PROGRESS.match(line) and now - last_progress >= PROGRESS_EVERY:
                    echo(f"  {stamp} {line.strip()[:150]}")
                    last_shown = last_progress = now
                elif not _PROGRESS.match(line) and _NOTABLE.search(line) and len(line) < 300:
                    echo(f"  {stamp} {line.strip()}")
                    last_shown = now
            if now - last_shown >= heartbeat:
                echo(f"  {stamp} still building ...")
                last_shown = now
        return proc.wait(), list(tail)


# -- run -----------------------------------------------------------------------------------


def server_command(paths: Paths, spec: ModelSpec, model_path: Path, *, port: int, threads: int = 2) -> list[str]:
    """The server's command line, tuned for a small CPU.

    - no ``--chat_format``: llama-cpp-python then renders the chat template stored in the
      GGUF (Qwen2.5's own template, which lists the offered tools and shows tool results as
      ``<tool_response>``); the model answers with ``<tool_call>{json}</tool_call>`` text,
      which Navi's local-model aids turn into real calls;
    - ``--interrupt_requests False``: by default a second request (a title, a memory summary)
      would cut the running answer short; with one slot it now waits its turn instead;
    - n_threads 2 / n_batch 256: two cores, prompt evaluation in moderate batches;
    - a default ``max_tokens`` of 1024 (``llama_serve.py``): without it a request that sets none
      (Navi's) generates until the context is full when the model loops;
    - ``--prompt_slots``: the evaluated prompts of that many other conversations are kept aside
      (``llama_serve.py``), so a memory summary, a title or a helper agent in between does not cost
      the conversation a whole new prefill of its ~2 000-token prompt;
    - ``--logits_all False``: the server's default keeps the logits of every prompt token (n_ctx x the
      vocabulary, 5 GB for Qwen2.5 at 8 192), which only ``logprobs`` reads and Navi never asks for; the
      servers grew to 9 and 11 GB with it (issue 24, round 22).
    """
    return [
        str(paths.python), str(LAUNCHER), "--default_max_tokens", str(DEFAULT_MAX_TOKENS),
        "--model", str(model_path), "--model_alias", spec.alias,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(spec.n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
        "--n_batch", "256", "--interrupt_requests", "False", "--logits_all", "False",
        "--prompt_slots", str(PROMPT_SLOTS),
    ]


def read_pid_file(paths: Paths) -> dict[str, Any] | None:
    try:
        data = json.loads(paths.pid_file.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


def is_our_server(pid: int) -> bool:
    """Whether ``pid`` is alive and runs our llama_cpp server (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc (macOS): trust the pid file
    return "llama_cpp.server" in cmdline or LAUNCHER.name in cmdline


def models_answer(base_url: str, timeout: float = 2.0) -> list[str] | None:
    """The model ids ``GET {base_url}/models`` lists, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as resp:
            data = json.loads(resp.read())
    except (OSError, ValueError):
        return None
    return [m.get("id", "") for m in data.get("data", []) if isinstance(m, dict)]


def base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


def start(paths: Paths, spec: ModelSpec, model_path: Path, *, port: int, echo: Echo = print,
          wait: float = 180.0, threads: int = 2) -> str:
    """Start the server in the background (idempotent); returns its base URL once /v1/models answers."""
    running = read_pid_file(paths)
    if running and is_our_server(running["pid"]):
        url = base_url(int(running["port"]))
        if models_answer(url) is not None:
            echo(f"server: already running (pid {running['pid']}) at {url}")
            return url
    if installed_version(paths) != SERVER_VERSION:
        raise ServerError(f"the server is not installed in {paths.venv}: run `python manage.py real_model setup`")
    if models_answer(base_url(port)) is not None:
        raise ServerError(f"port {port} is already taken by another server: choose one with --port")
    cmd = server_command(paths, spec, model_path, port=port, threads=threads)
    with paths.log.open("ab") as log_fh:
        log_fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
        log_fh.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    paths.pid_file.write_text(json.dumps({"pid": proc.pid, "port": port, "model": spec.key, "alias": spec.alias}))
    url = base_url(port)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            paths.pid_file.unlink(missing_ok=True)
            raise ServerError(f"the server exited during start-up (code {proc.returncode}); see {paths.log}:\n"
                              + _tail(paths.log))
        if models_answer(url) is not None:
            echo(f"server: running (pid {proc.pid}) at {url}, model {spec.alias}")
            return url
        time.sleep(0.5)
    stop(paths, echo=lambda _: None)
    raise ServerError(f"the server did not answer within {wait:.0f} s; see {paths.log}:\n" + _tail(paths.log))


def stop(paths: Paths, *, echo: Echo = print, grace: float = 15.0) -> bool:
    """SIGTERM our server (SIGKILL after ``grace`` seconds); True when one was running."""
    running = read_pid_file(paths)
    if not running:
        echo("server: not running (no pid file)")
        return False
    pid = int(running["pid"])
    if not is_our_server(pid):
        paths.pid_file.unlink(missing_ok=True)
        echo(f"server: not running (stale pid file for pid {pid} removed)")
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        echo(f"server: pid {pid} did not stop within {grace:.0f} s; killed")
    else:
        echo(f"server: stopped (pid {pid})")
    paths.pid_file.unlink(missing_ok=True)
    return True


def status(paths: Paths) -> dict[str, Any]:
    running = read_pid_file(paths)
    alive = bool(running and is_our_server(int(running["pid"])))
    url = base_url(int(running["port"])) if running and alive else None
    return {
        "installed": installed_version(paths),
        "running": alive,
        "pid": running["pid"] if running and alive else None,
        "url": url,
        "models": models_answer(url) if url else None,
        "log": str(paths.log),
    }


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # reap it when it is our child
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _proc_state(pid)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].split("\n", 1)[0].lower()
    except (OSError, IndexError):
        return ""


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
