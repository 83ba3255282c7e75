"""A live Navi: the real `manage.py start` in a subprocess on a free port.

Embedded tier: one process (server + Celery worker + beat), its own SQLite file.
Scale-out tier: the ASGI server, a `celery worker` and a `celery beat` process,
a fresh PostgreSQL database and the Redis of the machine.
"""
from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.users import PASSWORD

__all__ = ["LiveNavi", "free_port", "kill_server", "live_navi", "restart_server", "start_live_navi", "scaleout_env"]

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_redis_dbs = itertools.cycle([n for n in range(1, 16) if n != 9])  # db 9: the test process's own layer


def scaleout_env() -> dict[str, str]:
    """DATABASE_URL/REDIS_URL for one live stack: a fresh PostgreSQL database and a Redis database of
    its own (flushed), so stacks alive at the same time never take each other's Celery tasks."""
    import psycopg
    import redis

    name = f"navi_live_{uuid.uuid4().hex[:8]}"
    base = os.environ.get("NAVI_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    redis_base = os.environ.get("NAVI_TEST_REDIS", "redis://127.0.0.1:6379/9").rsplit("/", 1)[0]
    redis_url = f"{redis_base}/{next(_redis_dbs)}"
    client = redis.Redis.from_url(redis_url)
    try:
        client.flushdb()
    finally:
        client.close()
    return {"DATABASE_URL": base.rsplit("/", 1)[0] + "/" + name, "REDIS_URL": redis_url}


@dataclass
class LiveNavi:
    url: str
    port: int
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    token: str = ""
    username: str = "livetester"
    logs: list[Path] = field(default_factory=list)

    def ws_url(self, session_id: str, **query: Any) -> str:
        params = {"token": self.token, **query}
        qs = "&".join(f"{k}={v}" for k, v in params.items())
        return f"ws://127.0.0.1:{self.port}/ws/sessions/{session_id}?{qs}"

    def request(self, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            return exc.code, json.loads(raw) if raw else None

    def manage(self, *args: str) -> str:
        out = subprocess.run(
            [PYTHON, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=60
        )
        if out.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed: {out.stderr[-2000:]}")
        return out.stdout

    def output(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-5000:] for p in self.logs if p.exists())

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


def start_live_navi(tmp: Path, extra_env: dict[str, str] | None = None, *, tier: str | None = None) -> LiveNavi:
    tier = tier or os.environ.get("NAVI_TEST_TIER", "embedded")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(
        {
            "NAVI_DATA_DIR": str(tmp / "data"),
            "SESSION_FILES_DIR": str(tmp / "session_files"),
            "NAVI_PORT": str(port),
            "NAVI_HOST": "127.0.0.1",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if tier == "scaleout":
        env.update(scaleout_env())
    env.update(extra_env or {})
    live = LiveNavi(url=f"http://127.0.0.1:{port}", port=port, env=env)
    if tier == "scaleout":
        live.manage("migrate", "--noinput", "-v", "0")
    _spawn(live, tmp, "server", [PYTHON, "manage.py", "start"])
    if tier == "scaleout":
        _spawn(live, tmp, "worker", [PYTHON, "-m", "celery", "-A", "navi_site", "worker", "-P", "threads",
                                     "-c", "4", "-l", "WARNING", "--without-heartbeat", "--without-mingle",
                                     "--without-gossip", "-n", f"live-{port}@%h"])
        _spawn(live, tmp, "beat", [PYTHON, "-m", "celery", "-A", "navi_site", "beat", "-l", "WARNING",
                                   "-s", str(tmp / "beat-schedule")])
    _wait_healthy(live)
    env_user = {**env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD}
    subprocess.run(
        [PYTHON, "manage.py", "createsuperuser", "--noinput", "--username", live.username, "--email", "t@example.com"],
        cwd=ROOT, env=env_user, check=True, capture_output=True, timeout=60,
    )
    live.token = live.manage("create_api_token", live.username).strip()
    return live


def kill_server(live: LiveNavi, sig: int = signal.SIGKILL) -> None:
    """Stop the ASGI server process (embedded: the whole of Navi) with ``sig`` and reap it.
    Scale-out: the Celery worker and beat keep running."""
    proc = live.procs[0]
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(30)


def restart_server(live: LiveNavi, tmp: Path) -> None:
    """Start the server again on the same data and database (a new port), after ``kill_server``."""
    port = free_port()
    live.port, live.url = port, f"http://127.0.0.1:{port}"
    live.env = {**live.env, "NAVI_PORT": str(port)}
    others = live.procs[1:]
    live.procs = []
    _spawn(live, tmp, f"server-{port}", [PYTHON, "manage.py", "start", "--no-migrate"])
    live.procs += others
    _wait_healthy(live)


def _spawn(live: LiveNavi, tmp: Path, name: str, cmd: list[str]) -> None:
    log = tmp / f"{name}.log"
    live.logs.append(log)
    live.procs.append(
        subprocess.Popen(cmd, cwd=ROOT, env=live.env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    )


def _wait_healthy(live: LiveNavi, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if live.procs[0].poll() is not None:
            raise RuntimeError(f"Navi exited during start-up:\n{live.output()}")
        try:
            with urllib.request.urlopen(live.url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    live.stop()
    raise RuntimeError(f"Navi did not become healthy within {timeout} s:\n{live.output()}")


@pytest.fixture(scope="session")
def live_navi(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[LiveNavi]:
    """A live Navi shared by the session; OLLAMA_HOST points at the fake model server when there is one."""
    extra: dict[str, str] = {}
    try:
        fake = request.getfixturevalue("fake_llm_server")
        extra["OLLAMA_HOST"] = fake.url
        extra["OPENAI_BASE_URL"] = fake.url + "/v1"
    except pytest.FixtureLookupError:
        pass
    live = start_live_navi(tmp_path_factory.mktemp("live"), extra)
    yield live
    live.stop()
