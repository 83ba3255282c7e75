"""Scale-out: two ASGI processes share PostgreSQL and Redis. A turn runs on A; a client of B
replays it and follows it live; a stop sent to B stops the run on A."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.live import PYTHON, LiveNavi, _spawn, _wait_healthy, free_port
from tests.transport.test_protocol_live import LONG, SLOW, _idle, _seqs_contiguous, _session
from tests.transport.wsclient import Client, types

pytestmark = pytest.mark.scaleout


@pytest.fixture(scope="module")
def navi_b(navi: LiveNavi, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveNavi]:
    """A second ASGI process on the same database and Redis as ``navi``."""
    tmp = tmp_path_factory.mktemp("navi_b")
    port = free_port()
    env = {**navi.env, "NAVI_PORT": str(port), "NAVI_DATA_DIR": str(tmp / "data")}
    live = LiveNavi(url=f"http://127.0.0.1:{port}", port=port, env=env, token=navi.token)
    _spawn(live, tmp, "server-b", [PYTHON, "manage.py", "start", "--no-migrate"])
    _wait_healthy(live)
    yield live
    live.stop()


async def test_replay_and_live_on_another_process(navi: LiveNavi, navi_b: LiveNavi, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=LONG, **SLOW)
    on_a = await _idle(navi, sid)
    await on_a.send({"type": "message", "content": "Stream on A"})
    first = [await on_a.recv() for _ in range(4)]
    await on_a.close()
    status, listing = navi_b.request("GET", "/sessions?limit=200")
    assert [s["busy"] for s in listing["items"] if s["id"] == sid] == [True]  # B knows A is busy
    on_b = await Client.open(navi_b.ws_url(sid, after=first[-1]["seq"]))
    rest = await on_b.until("session_sync", timeout=20)
    events = first + rest
    assert _seqs_contiguous(events) and types(events)[-2:] == ["stream_end", "session_sync"]
    assert "".join(e["delta"] for e in events if e["type"] == "stream_delta") == LONG
    await on_b.close()


async def test_stop_on_b_stops_the_run_on_a(navi: LiveNavi, navi_b: LiveNavi, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=LONG * 3, **SLOW)
    on_a = await _idle(navi, sid)
    on_b = await _idle(navi_b, sid)
    await on_a.send({"type": "message", "content": "Stream on A, stop from B"})
    await on_b.until("stream_delta")
    # a message sent to B while A runs is queued for A's run (the lock and the queue are in Redis)
    await on_b.send({"type": "message", "content": "me too"})
    queued = (await on_b.until("steer_queued"))[-1]
    status, out = await asyncio.to_thread(navi_b.request, "POST", f"/sessions/{sid}/stop")
    assert status == 200 and out == {"ok": True, "stopped": True}
    on_a_end = await on_a.until("session_sync", timeout=5)
    assert types(on_a_end)[-3:] == ["stream_stopped", "steer_dropped", "session_sync"]
    assert on_a_end[-2]["items"] == [{"id": queued["id"], "content": "me too"}]  # stop gave it back
    assert types(await on_b.until("session_sync", timeout=5))[-3:] == ["stream_stopped", "steer_dropped", "session_sync"]
    await on_a.close()
    await on_b.close()


async def test_a_message_sent_to_b_joins_the_run_on_a(navi: LiveNavi, navi_b: LiveNavi, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=LONG, **SLOW)
    fake_ollama.script(text="Answered from A.")
    on_a = await _idle(navi, sid)
    on_b = await _idle(navi_b, sid)
    await on_a.send({"type": "message", "content": "Stream on A"})
    await on_b.until("stream_delta")
    await on_b.send({"type": "message", "content": "sent to B"})
    queued = (await on_b.until("steer_queued"))[-1]
    assert (await on_a.until("steer_queued"))[-1]["id"] == queued["id"]  # every tab, on every process
    status, detail = await asyncio.to_thread(navi.request, "GET", f"/sessions/{sid}")
    assert detail["pending_steers"] == [{"id": queued["id"], "content": "sent to B"}]
    events = await on_a.until("session_sync", timeout=30)
    accepted = [e for e in events if e["type"] == "steer_accepted"]
    assert [(e["id"], e["content"]) for e in accepted] == [(queued["id"], "sent to B")]
    assert events[-2]["type"] == "stream_end" and events[-2]["content"] == "Answered from A."
    assert "steer_accepted" in types(await on_b.until("session_sync", timeout=30))
    status, detail = await asyncio.to_thread(navi_b.request, "GET", f"/sessions/{sid}")
    assert [m["content"] for m in detail["messages"] if m["role"] == "user"] == ["Stream on A", "sent to B"]
    await on_a.close()
    await on_b.close()
