"""The WebSocket protocol end to end: real client, live server, real agent, fake Ollama.

Every test scripts the fake model; the secretary profile plans first, so the first
scripted reply ("DIRECT") answers the planner.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.transport.wsclient import Client, types

SLOW = {"token_size": 2, "delay_between_chunks": 0.03}
LONG = "The quick brown fox jumps over the lazy dog. " * 6


def _session(navi: Any, title: str = "t", profile_id: str | None = None) -> str:
    body: dict[str, Any] = {"title": title}
    if profile_id:
        body["profile_id"] = profile_id
    status, out = navi.request("POST", "/sessions", body)
    assert status == 201, out
    return str(out["session_id"])


async def _idle(navi: Any, sid: str, **query: Any) -> Client:
    ws = await Client.open(navi.ws_url(sid, **query))
    assert await ws.recv() == {"type": "session_sync"}
    return ws


def _seqs_contiguous(events: list[dict[str, Any]]) -> bool:
    seqs = [e["seq"] for e in events]
    return seqs == list(range(seqs[0], seqs[0] + len(seqs)))


async def test_simple_turn(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(thinking="Let me think about it.", text="Paris is the capital of France.")
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "What is the capital of France?"})
    events = await ws.until("session_sync")
    kinds = types(events)
    assert kinds[0] == "stream_start" and kinds[-2:] == ["stream_end", "session_sync"]
    assert kinds.index("thinking_end") < kinds.index("stream_delta")
    assert set(kinds[1:kinds.index("thinking_end")]) == {"thinking_delta"}
    assert "".join(e["delta"] for e in events if e["type"] == "thinking_delta") == "Let me think about it."
    assert "".join(e["delta"] for e in events if e["type"] == "stream_delta") == "Paris is the capital of France."
    assert events[-2]["content"] == "Paris is the capital of France." and events[-2]["max_context_tokens"] > 0
    assert _seqs_contiguous(events)
    status, detail = navi.request("GET", f"/sessions/{sid}")
    assert [(m["role"], m["content"]) for m in detail["messages"]] == [
        ("user", "What is the capital of France?"), ("assistant", "Paris is the capital of France.")]
    await ws.close()


async def test_tools(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(thinking="I need the time.", tool_calls=[{"name": "get_current_datetime", "arguments": {}}])
    fake_ollama.script(text="It is now.")
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "What time is it right now?"})
    events = await ws.until("session_sync")
    kinds = [k for k in types(events) if k not in ("thinking_delta", "stream_delta")]
    assert kinds == ["stream_start", "turn_thinking", "tool_started", "tool_call", "stream_end", "session_sync"]
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["tool"] == "get_current_datetime" and call["success"] is True and call["is_subagent"] is False
    await ws.close()


async def test_planning(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="Goal: compare two things.\nComplexity: medium\nREFLECT: no")
    fake_ollama.script(text="1. Look up the current date (TOOL: get_current_datetime)\n2. Write the answer (SELF)")
    fake_ollama.script(text="Here is the comparison.")
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "Compare the two options and write me a report"})
    events = await ws.until("session_sync")
    kinds = types(events)
    assert kinds[:2] == ["stream_start", "plan_ready"] and "get_current_datetime" in events[1]["plan"]
    assert kinds[-2:] == ["stream_end", "session_sync"]
    await ws.close()


async def test_subagent(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(tool_calls=[{"name": "spawn_agent", "arguments": {"task": "Find the date and report it."}}])
    fake_ollama.script(tool_calls=[{"name": "get_current_datetime", "arguments": {}}])
    fake_ollama.script(text="The subagent's report.")
    fake_ollama.script(text="All done.")
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "Delegate finding the date to a helper"})
    events = await ws.until("session_sync", timeout=30)
    tools = [(e["type"], e["tool"], e["is_subagent"]) for e in events if e["type"] in ("tool_started", "tool_call")]
    assert tools == [
        ("tool_started", "spawn_agent", False),
        ("tool_started", "get_current_datetime", True),
        ("tool_call", "get_current_datetime", True),
        ("tool_call", "spawn_agent", False),
    ]
    assert types(events)[-2:] == ["stream_end", "session_sync"] and events[-2]["content"] == "All done."
    await ws.close()


async def test_profile_switch(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(tool_calls=[{"name": "switch_profile", "arguments": {"profile_id": "server_admin"}}])
    fake_ollama.script(text="Switched.")
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "Switch to the server admin profile please"})
    events = await ws.until("session_sync")
    kinds = [k for k in types(events) if k != "stream_delta"]
    assert kinds == ["stream_start", "tool_started", "profile_switched", "tool_call", "stream_end", "session_sync"]
    assert next(e for e in events if e["type"] == "profile_switched")["profile_id"] == "server_admin"
    await ws.close()


async def test_stop_via_rest_and_frame(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=LONG, **SLOW)
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "Tell me a long story"})
    await ws.until("stream_delta")
    started = time.monotonic()
    status, out = await asyncio.to_thread(navi.request, "POST", f"/sessions/{sid}/stop")
    assert status == 200 and out == {"ok": True, "stopped": True}
    events = await ws.until("session_sync")
    assert types(events)[-2:] == ["stream_stopped", "session_sync"] and time.monotonic() - started < 3
    # the stop frame does the same
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=LONG, **SLOW)
    await ws.send({"type": "message", "content": "Another long story"})
    await ws.until("stream_delta")
    await ws.send({"type": "stop"})
    assert types(await ws.until("session_sync"))[-2:] == ["stream_stopped", "session_sync"]
    status, out = navi.request("POST", f"/sessions/{sid}/stop")
    assert out == {"ok": True, "stopped": False}
    await ws.close()


async def test_delete_during_a_turn_stops_it_first(navi: Any, fake_ollama: Any) -> None:
    """DELETE waits for the turn (running on the server's loop) to stop, from the HTTP loop."""
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=LONG * 3, **SLOW)
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "Tell me a long story"})
    await ws.until("stream_delta")
    started = time.monotonic()
    status, out = await asyncio.to_thread(navi.request, "DELETE", f"/sessions/{sid}")
    assert status == 200 and out == {"ok": True}, out
    assert time.monotonic() - started < 5  # stopped cooperatively, not the 15 s wait_idle limit
    assert types(await ws.until("session_sync"))[-2:] == ["stream_stopped", "session_sync"]
    status, out = navi.request("GET", f"/sessions/{sid}")
    assert status == 404, out
    await ws.close()


async def test_two_tabs_see_the_same_events(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(thinking="hm", text="Both tabs see this.")
    a, b = await _idle(navi, sid), await _idle(navi, sid)
    await a.send({"type": "message", "content": "Say something to both tabs"})
    ea, eb = await a.until("session_sync"), await b.until("session_sync")
    assert ea == eb and _seqs_contiguous(ea)
    await a.close()
    await b.close()


async def test_reconnect_mid_turn_with_after_replays_without_gap_or_duplicate(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=LONG, **SLOW)
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "Stream a long answer"})
    seen = [await ws.recv() for _ in range(4)]
    await ws.close()  # the run goes on without any client
    await asyncio.sleep(0.3)
    again = await Client.open(navi.ws_url(sid, after=seen[-1]["seq"]))
    rest = await again.until("session_sync")
    events = seen + rest
    assert _seqs_contiguous(events)
    assert "".join(e["delta"] for e in events if e["type"] == "stream_delta") == LONG
    assert types(events)[-2:] == ["stream_end", "session_sync"]
    # a fresh client (no ?after) mid-turn gets the whole turn
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=LONG, **SLOW)
    await again.send({"type": "message", "content": "Again"})
    await again.until("stream_delta")
    fresh = await Client.open(navi.ws_url(sid))
    whole = await fresh.until("session_sync")
    assert whole[0]["type"] == "stream_start" and _seqs_contiguous(whole)
    assert "".join(e["delta"] for e in whole if e["type"] == "stream_delta") == LONG
    await again.close()
    await fresh.close()


async def test_busy_session(navi: Any, fake_ollama: Any) -> None:
    """A second turn is refused while one runs; a message over the WebSocket joins the running turn
    instead (steering: queued, then read at the turn's next step)."""
    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text=LONG, **SLOW)
    fake_ollama.script(text="Answer to the second message.")
    a, b = await _idle(navi, sid), await _idle(navi, sid)
    await a.send({"type": "message", "content": "First message"})
    await b.until("stream_delta")
    await b.send({"type": "message", "content": "Second message", "ref": "b-1"})
    queued = (await b.until("steer_queued"))[-1]
    assert (queued["content"], queued["ref"]) == ("Second message", "b-1")
    status, out = navi.request("POST", f"/sessions/{sid}/messages", {"content": "Third"})
    assert status == 409 and "already running" in out["detail"]
    status, listing = navi.request("GET", "/sessions?limit=200")
    assert [s["busy"] for s in listing["items"] if s["id"] == sid] == [True]
    events = await a.until("session_sync", timeout=30)
    assert "error" not in types(events)
    assert types(events).index("steer_accepted") < len(events) - 2 and types(events)[-2] == "stream_end"
    assert events[-2]["content"] == "Answer to the second message."
    status, detail = navi.request("GET", f"/sessions/{sid}")
    assert [m["content"] for m in detail["messages"] if m["role"] == "user"] == ["First message", "Second message"]
    await a.close()
    await b.close()


async def test_heartbeat(navi: Any) -> None:
    sid = _session(navi)
    ws = await _idle(navi, sid)
    raw = await asyncio.wait_for(ws.conn.recv(), 5)
    assert raw == '{"type":"heartbeat"}'
    await ws.close()


async def test_the_server_pings_at_ws_ping_seconds(navi: Any) -> None:
    """daphne's protocol pings follow WS_PING_SECONDS (2 s here; 60 by default instead of 20)."""
    import logging

    seen: list[str] = []

    class Frames(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger = logging.getLogger("tests.ws_frames")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Frames())
    ws = await Client.open(navi.ws_url(_session(navi)), logger=logger, ping_interval=None)
    try:
        deadline = asyncio.get_running_loop().time() + 6
        while not any(m.startswith("< PING") for m in seen) and asyncio.get_running_loop().time() < deadline:
            try:
                await asyncio.wait_for(ws.conn.recv(), 0.5)
            except TimeoutError:
                pass
    finally:
        await ws.close()
    assert any(m.startswith("< PING") for m in seen), seen[:10]


async def test_rest_message_is_streamed_to_websocket_clients(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi)
    fake_ollama.script(text="Answer over REST.")  # no planner call first: run() has no planning phase
    ws = await _idle(navi, sid)
    status, out = await asyncio.to_thread(navi.request, "POST", f"/sessions/{sid}/messages",
                                          {"content": "Answer me over REST"})
    assert status == 200 and out == {"content": "Answer over REST.", "stopped": False}
    events = await ws.until("session_sync")
    assert types(events)[0] == "stream_start" and events[-2]["content"] == "Answer over REST."
    await ws.close()


async def test_title_is_generated_after_the_first_turn(navi: Any, fake_ollama: Any) -> None:
    sid = _session(navi, title="")
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text="Lisbon is lovely in May.")
    fake_ollama.script(text='"Trip to Lisbon in May."')
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "Plan a trip to Lisbon in May"})
    await ws.until("session_sync")
    deadline = time.monotonic() + 15
    title = ""
    while time.monotonic() < deadline and not title:
        title = navi.request("GET", f"/sessions/{sid}")[1]["title"]
        await asyncio.sleep(0.2)
    assert title == "Trip to Lisbon in May"
    title_call = fake_ollama.chat_requests[-1]["json"]
    assert title_call["think"] is False and title_call["options"]["temperature"] == 0.3
    await ws.close()


async def test_files_upload_and_use(navi: Any, fake_ollama: Any) -> None:
    from tests.transport.wsclient import multipart

    sid, other = _session(navi), _session(navi)
    status, up = await asyncio.to_thread(_upload, navi, sid, "notes.txt", b"hello file")
    assert status == 201 and up["name"] == "notes.txt" and up["size"] == 10 and f"/{sid}/uploads/" in up["path"]
    assert [f["id"] for f in navi.request("GET", f"/sessions/{sid}/files")[1]] == [up["id"]]
    status, big = await asyncio.to_thread(_upload, navi, sid, "big.bin", b"x" * (2 * 1024 * 1024))
    assert status == 413 and "1 MB" in big["detail"]
    assert len(navi.request("GET", f"/sessions/{sid}/files")[1]) == 1
    ws_other = await _idle(navi, other)
    await ws_other.send({"type": "message", "content": "read it", "files": [up["id"]]})
    err = await ws_other.recv()
    assert err["type"] == "error" and "not an upload of this session" in err["message"]
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text="I see the file.")
    ws = await _idle(navi, sid)
    await ws.send({"type": "message", "content": "read it", "files": [{"name": "notes.txt", "path": up["path"]}]})
    await ws.until("session_sync")
    user = navi.request("GET", f"/sessions/{sid}")[1]["messages"][0]
    assert up["path"] in user["content"]
    assert multipart  # imported for _upload
    await ws.close()
    await ws_other.close()


def _upload(navi: Any, sid: str, name: str, data: bytes) -> tuple[int, Any]:
    import json
    import urllib.error
    import urllib.request

    from tests.transport.wsclient import multipart

    body, ctype = multipart("file", name, data)
    req = urllib.request.Request(f"{navi.url}/sessions/{sid}/files", data=body, method="POST")
    req.add_header("Authorization", f"Bearer {navi.token}")
    req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize("frame", [b"\x00\x01binary", "{not json", '{"type": "dance"}',
                                   '{"type": "message", "content": "   "}', "x" * (5 * 1024 * 1024)])
async def test_bad_frames_on_the_live_server(navi: Any, frame: Any) -> None:
    sid = _session(navi)
    ws = await _idle(navi, sid)
    await ws.send(frame)
    event = await ws.recv()
    assert event["type"] == "error" and len(event["message"]) > 10
    await ws.send({"type": "stop"})  # still open and usable
    assert await ws.quiet(0.3) == []
    assert navi.request("GET", f"/sessions/{sid}")[1]["messages"] == []
    await ws.close()
