"""Scale-out: the services under Navi fail mid-turn. Redis (the broker, channel layer and run
registry; a server of the test's own on its own port) restarts empty; PostgreSQL drops every
connection of Navi's database (pg_terminate_backend: the shared server and its other users are not
disturbed). Asserted: the user message and the answer (whole, or the partial one marked
interrupted) are saved, a tool is not run again, and the server answers the next message."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from tests.faults.conftest import MARK_TOOL, Stack, collect_text, wait_for_event
from tests.support.live import free_port, start_live_navi

pytestmark = pytest.mark.skipif(os.environ.get("NAVI_TEST_TIER") != "scaleout",
                                reason="scale-out only: embedded mode has no Redis or PostgreSQL")
STORY = "The river carried the fox's map past the mill and under the old stone bridge. " * 4


class OwnRedis:
    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis(port=self.port, socket_connect_timeout=0.5).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, down_for: float = 1.0) -> None:
        self.stop()
        time.sleep(down_for)
        self.start()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[OwnRedis]:
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    server = OwnRedis(free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory, fake_llm_server: Any, redis_server: OwnRedis) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("faults-services")
    data = tmp / "data"
    (data / "tools").mkdir(parents=True)
    (data / "tools" / "mark_and_wait.py").write_text(MARK_TOOL)
    (data / "tools" / "enabled.json").write_text(json.dumps(["mark_and_wait"]))
    navi = start_live_navi(tmp, {"OLLAMA_HOST": fake_llm_server.url, "OPENAI_BASE_URL": fake_llm_server.url + "/v1",
                                 "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0"}, tier="scaleout")
    yield Stack(navi=navi, tmp=tmp, data=data)
    navi.stop()


def _terminate_db_connections(stack: Stack) -> int:
    import psycopg

    name = stack.navi.env["DATABASE_URL"].rsplit("/", 1)[1]
    base = os.environ.get("NAVI_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
    with psycopg.connect(base, autocommit=True) as conn:
        rows = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                            "AND pid <> pg_backend_pid()", (name,)).fetchall()
    return len(rows)


async def _ends(ws: Any, timeout: float = 30) -> list[dict[str, Any]]:
    """Events until the turn ends (stream_end / error / stream_stopped) or the socket closes."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = await ws.recv(deadline - time.monotonic())
        except Exception:  # noqa: BLE001 - the server closed the socket
            break
        seen.append(event)
        if event["type"] in ("stream_end", "error", "stream_stopped"):
            break
    return seen


def _settled(stack: Stack, sid: str, timeout: float = 40) -> list[dict[str, Any]]:
    """The session's messages once no turn runs any more (recovery closes dead ones)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, out = stack.navi.request("GET", f"/sessions/{sid}")
        if status == 200 and not out.get("busy") and out["messages"] and out["messages"][-1]["role"] != "user":
            return list(out["messages"])
        time.sleep(0.5)
    raise AssertionError(f"the turn did not settle: {out}")


async def _answers_again(stack: Stack, fake: Any, sid: str) -> list[list[dict[str, Any]]]:
    """Send "Are you there?" until it is answered; the events of every attempt. An attempt may still
    meet the fault (its turn ends with an error); the socket of the next one must then find the
    session idle: the attempt's turn is over, and nothing of it starts later."""
    attempts: list[list[dict[str, Any]]] = []
    deadline = time.monotonic() + 30
    while True:
        ws = await stack.idle_socket(sid)
        fake.script(text="DIRECT")
        fake.script(text="Back again.")
        await ws.send({"type": "message", "content": "Are you there?"})
        try:
            events = await ws.until("session_sync", timeout=30)
        except TimeoutError:
            raise AssertionError(f"no answer to a message after the fault:\n{stack.navi.output()}") from None
        await ws.close()
        attempts.append(events)
        ends = [e for e in events if e["type"] in ("stream_end", "error")]
        if ends and ends[0]["type"] == "stream_end":
            assert ends[0]["content"] == "Back again."
            return attempts
        fake.reset()
        assert time.monotonic() < deadline, events
        await asyncio.sleep(1)


def _check_story(messages: list[dict[str, Any]]) -> None:
    user = [m for m in messages if m["role"] == "user"]
    assert [m["content"] for m in user] == ["Tell me a story"]
    [answer] = [m for m in messages if m["role"] == "assistant"]
    assert answer["content"] and STORY.startswith(answer["content"].strip()[:len(STORY)])
    if answer["content"] != STORY.strip() and answer["content"] != STORY:
        assert answer["interrupted"] or answer.get("metadata", {}).get("error"), answer  # a partial one is marked


async def test_redis_restarts_mid_stream(svc: Stack, redis_server: OwnRedis, fake_ollama: Any) -> None:
    sid = svc.session("Redis restart")
    ws = await svc.idle_socket(sid)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=STORY, token_size=4, delay_between_chunks=0.04)
    await ws.send({"type": "message", "content": "Tell me a story"})
    await collect_text(ws, at_least=20, streamed_for=1.0)
    await asyncio.to_thread(redis_server.restart)
    await _ends(ws)
    await ws.close()
    messages = await asyncio.to_thread(_settled, svc, sid)
    _check_story(messages)
    await _answers_again(svc, fake_ollama, sid)


async def test_postgres_drops_connections_mid_stream(svc: Stack, fake_ollama: Any) -> None:
    sid = svc.session("PostgreSQL drop")
    ws = await svc.idle_socket(sid)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=STORY, token_size=4, delay_between_chunks=0.04)
    await ws.send({"type": "message", "content": "Tell me a story"})
    await collect_text(ws, at_least=20, streamed_for=1.0)
    assert await asyncio.to_thread(_terminate_db_connections, svc) > 0
    await _ends(ws)
    await ws.close()
    messages = await asyncio.to_thread(_settled, svc, sid)
    _check_story(messages)
    await _answers_again(svc, fake_ollama, sid)


async def _ask(stack: Stack, ws: Any, fake: Any, content: str, answer: str) -> list[dict[str, Any]]:
    """One message; the events of its turn up to ``session_sync``."""
    fake.script(text="DIRECT")
    fake.script(text=answer)
    await ws.send({"type": "message", "content": content})
    try:
        return await ws.until("session_sync", timeout=30)
    except (TimeoutError, ConnectionClosed) as exc:
        raise AssertionError(f"no answer to {content!r} ({exc!r}):\n{stack.navi.output()}") from None


async def test_postgres_drops_connections_between_turns(svc: Stack, fake_ollama: Any) -> None:
    """Every message after the drop is answered, the first one included: no turn fails on a
    connection the server ended while the process was idle. Turns before the drop leave connections
    in several of the server's threads, and several messages after it meet them, whichever thread
    each database read happens to run on: on a tab that stayed open across the drop (no access check
    of a new socket runs before its turn) and on new sockets."""
    sid = svc.session("PostgreSQL drop between turns")
    tab = await svc.idle_socket(sid)
    for n in range(3):
        events = await _ask(svc, tab, fake_ollama, f"Hi {n}", f"Hello {n}.")
        assert [e["type"] for e in events][-2:] == ["stream_end", "session_sync"], events
    assert await asyncio.to_thread(_terminate_db_connections, svc) > 0
    for n in range(4):
        ws = tab if n < 2 else await svc.idle_socket(sid)
        events = await _ask(svc, ws, fake_ollama, f"Are you there? {n}", f"Back again {n}.")
        ends = [e for e in events if e["type"] in ("stream_end", "error")]
        assert [e["type"] for e in ends] == ["stream_end"], (n, events)
        assert ends[0]["content"] == f"Back again {n}."
        if ws is not tab:
            await ws.close()
    await tab.close()
    messages = await asyncio.to_thread(svc.messages, sid)
    assert not [m for m in messages if m["interrupted"]], messages
    assert [m["content"] for m in messages] == [
        text for n in range(3) for text in (f"Hi {n}", f"Hello {n}.")] + [
        text for n in range(4) for text in (f"Are you there? {n}", f"Back again {n}.")]


async def test_postgres_drops_connections_during_a_tool(svc: Stack, fake_ollama: Any) -> None:
    sid = svc.session("PostgreSQL drop in a tool")
    ws = await svc.idle_socket(sid)
    marks = len(svc.side_effects())
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text="Marking.", tool_calls=[{"name": "mark_and_wait", "arguments": {"label": sid, "seconds": 2}}])
    fake_ollama.script(text="Marked and done.")
    await ws.send({"type": "message", "content": "Mark it"})
    await wait_for_event(ws, "tool_started")
    assert await asyncio.to_thread(_terminate_db_connections, svc) > 0
    await _ends(ws)
    await ws.close()
    messages = await asyncio.to_thread(_settled, svc, sid)
    assert svc.side_effects()[marks:] == [sid]  # the tool ran once
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant", "tool", "assistant"], messages
    assert messages[2]["content"] == "marked" and messages[3]["content"] == "Marked and done."
    await _answers_again(svc, fake_ollama, sid)
