"""Request/run ids on log lines; Ctrl-C stops the embedded server cleanly."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.django_db
def test_request_id_is_on_every_log_line_of_a_request(client, caplog) -> None:
    from tests.support.users import make_user, token_for

    token = token_for(make_user("alice"))
    with caplog.at_level(logging.INFO):
        resp = client.post("/sessions", data={}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    request_id = resp["X-Request-ID"]
    created = [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "session_created"]
    assert created and created[0]["request_id"] == request_id


@pytest.mark.django_db(transaction=True)
async def test_run_id_is_on_every_log_line_of_a_turn(agent_env, caplog) -> None:
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    agent_env.fake.script(text="ok")
    with caplog.at_level(logging.DEBUG):
        await agent_env.run("go")
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.name.startswith(("agent", "tools_app"))
             and r.msg.get("event") != "user_tools_loaded"]  # process-wide registry set-up, not part of the turn
    assert lines, "the turn logged nothing"
    assert all(line.get("run_id") and line.get("session_id") == agent_env.session_id for line in lines)


def test_ctrl_c_stops_the_embedded_server_cleanly(tmp_path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update({"NAVI_DATA_DIR": str(tmp_path), "NAVI_PORT": str(port), "LOG_LEVEL": "WARNING"})
    proc = subprocess.Popen([sys.executable, "manage.py", "start"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.decode()
    assert proc.returncode == 0, text
    assert "Navi (embedded mode) on http://127.0.0.1" in text and "Navi stopped." in text
    assert "Traceback" not in text


def test_a_request_aborted_by_its_client_is_not_logged_as_an_error(capsys) -> None:
    """asyncio reports a handler task's RequestAborted that nobody retrieved (a client gone while
    daphne cancels its request, e.g. at Ctrl-C); that is not an error, and no traceback is printed."""
    import asyncio
    import logging

    from django.core.exceptions import RequestAborted

    from navi_site.logging import configure

    configure(level="INFO", fmt="console")

    async def aborted() -> None:
        raise RequestAborted()

    async def failing() -> None:
        raise ValueError("a real bug")

    loop = asyncio.new_event_loop()
    try:
        for coro in (aborted(), failing()):
            task = loop.create_task(coro)
            loop.run_until_complete(asyncio.wait([task]))
            loop.call_exception_handler({"message": "Task exception was never retrieved",
                                         "exception": task.exception(), "future": task})
    finally:
        loop.close()
    logging.getLogger().handlers[0].flush()
    err = capsys.readouterr().err
    assert "a real bug" in err and "ValueError" in err
    assert err.count("Task exception was never retrieved") == 1  # the ValueError's, not RequestAborted's
