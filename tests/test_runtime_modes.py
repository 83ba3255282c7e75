"""Both runtime modes: a Celery task publishes an event to a session's group, a WebSocket client gets it.

Embedded: the worker is a thread of this process (memory broker, in-memory layer).
Scale-out: the worker is a separate `celery worker` process (Redis broker and layer).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from navi_site.asgi import application
from sessions_app import services
from sessions_app.tasks import publish_event
from tests.support.users import make_user, token_for

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.django_db(transaction=True)


async def _next_event(comm: WebsocketCommunicator, timeout: float) -> dict:
    """The next event, skipping the session_sync a client gets on connect when no turn runs."""
    while True:
        event = await comm.receive_json_from(timeout=timeout)
        if event.get("type") != "session_sync":
            return event


@sync_to_async
def _session() -> tuple[str, str]:
    alice = make_user("alice")
    return str(services.session_create(owner=alice).id), token_for(alice)


@pytest.mark.embedded_only
async def test_embedded_worker_thread_publishes_to_websocket_client(settings) -> None:
    import asyncio

    from navi_site.embedded import EmbeddedCelery
    from sessions_app import bus

    assert settings.CELERY_BROKER_URL == "memory://"
    sid, token = await _session()
    bus.register_server_loop(asyncio.get_running_loop())
    celery = EmbeddedCelery(concurrency=2, beat=False)
    await sync_to_async(celery.start)()
    try:
        comm = WebsocketCommunicator(application, f"/ws/sessions/{sid}?token={token}", headers=[(b"host", b"t")])
        assert (await comm.connect())[0]
        await sync_to_async(publish_event.delay)(sid, {"type": "recall_update", "session_id": sid, "action": "fired"})
        event = await _next_event(comm, 10)
        assert event == {"type": "recall_update", "session_id": sid, "action": "fired"}
        await comm.disconnect()
    finally:
        await sync_to_async(celery.stop)()
        bus.register_server_loop(None)  # type: ignore[arg-type]


@pytest.mark.scaleout
async def test_separate_worker_process_publishes_to_websocket_client(settings, tmp_path) -> None:
    assert settings.NAVI_MODE == "scale-out"
    sid, token = await _session()
    env = {**os.environ}
    worker = subprocess.Popen(  # noqa: ASYNC220 - started once, not awaited
        [sys.executable, "-m", "celery", "-A", "navi_site", "worker", "-P", "threads", "-c", "2", "-l", "WARNING",
         "--without-heartbeat", "--without-mingle", "--without-gossip", "-n", f"proof-{os.getpid()}@%h"],
        cwd=ROOT, env=env, stdout=(tmp_path / "worker.log").open("wb"), stderr=subprocess.STDOUT,
    )
    try:
        comm = WebsocketCommunicator(application, f"/ws/sessions/{sid}?token={token}", headers=[(b"host", b"t")])
        assert (await comm.connect())[0]
        await sync_to_async(publish_event.delay)(sid, {"type": "heartbeat"})
        assert await _next_event(comm, 30) == {"type": "heartbeat"}
        await comm.disconnect()
    finally:
        worker.terminate()
        worker.wait(20)


def _run_start(env: dict[str, str], *args: str, timeout: float = 40) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    full.update(env)
    return subprocess.run([sys.executable, "manage.py", "start", *args], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=timeout)


def test_busy_port_gives_a_clear_message(tmp_path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = _run_start({"NAVI_DATA_DIR": str(tmp_path), "NAVI_PORT": str(port)})
    assert out.returncode != 0
    assert f"Port {port} on 127.0.0.1 is already in use" in out.stderr
    assert "Traceback" not in out.stderr


def test_unreachable_redis_and_postgres_give_clear_messages(tmp_path) -> None:
    out = _run_start({"NAVI_DATA_DIR": str(tmp_path), "REDIS_URL": "redis://127.0.0.1:1/0",
                      "DATABASE_URL": "postgres://nobody@127.0.0.1:1/navi"})
    assert out.returncode != 0
    assert "Cannot connect to the database (postgresql" in out.stderr and "Check DATABASE_URL" in out.stderr
    out = _run_start({"NAVI_DATA_DIR": str(tmp_path), "REDIS_URL": "redis://127.0.0.1:1/0",
                      "DATABASE_URL": os.environ.get("NAVI_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")})
    if "Cannot connect to the database" in out.stderr:
        pytest.skip("no PostgreSQL on this machine to get past the database check")
    assert "Cannot connect to Redis at redis://127.0.0.1:1/0" in out.stderr


def test_scaleout_without_postgres_is_refused(tmp_path) -> None:
    out = _run_start({"NAVI_DATA_DIR": str(tmp_path), "REDIS_URL": "redis://127.0.0.1:6379/0"})
    assert out.returncode != 0 and "Scale-out mode (REDIS_URL set) needs PostgreSQL" in out.stderr


def test_live_server_serves_health_chat_page_and_static(live_navi) -> None:
    import json
    import urllib.request

    with urllib.request.urlopen(live_navi.url + "/health", timeout=5) as resp:
        health = json.loads(resp.read())
    assert health["status"] == "ok" and health["database"]["ok"] is True
    assert health["mode"] == ("scale-out" if os.environ.get("NAVI_TEST_TIER") == "scaleout" else "embedded")
    with urllib.request.urlopen(live_navi.url + "/static/css/auth.css", timeout=5) as resp:
        assert resp.status == 200 and b"--accent" in resp.read()
    status, body = live_navi.request("POST", "/sessions", {})
    assert status == 201 and body["profile_id"] == "secretary"
