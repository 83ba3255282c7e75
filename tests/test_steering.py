"""Steering a running turn (issue 22): a message sent while a turn runs waits for the turn's next
step, is read there (steer_accepted, then it is a user message of the history, in order), can be
withdrawn before that, and is given back when the turn stops. WebSocket and REST; both tiers
(scale-out: the queue is in Redis, and a message queued by another process reaches the run)."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.events import StreamEnd
from sessions_app.runs import RunRegistry, TurnRequest
from sessions_app.runs.steering import MAX_QUEUED, STEER_GONE
from tests.transport.helpers import connect, drain, make_session, receive_until, scripted, types

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = [{"id": "call_1", "name": "todo", "arguments": {"action": "read"}}]


def _req(agent_env: Any, text: str = "hi") -> TurnRequest:
    return TurnRequest(session_id=agent_env.session_id, text=text, user_id=agent_env.user.pk, user_role="staff")


async def _model_asked(fake: Any, n: int = 1) -> None:
    """Wait until the model server got its n-th request (the turn is past that step's boundary)."""
    for _ in range(500):
        if len(fake.chat_requests) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the model was asked {len(fake.chat_requests)} times, not {n}")


async def _turn_events(registry: RunRegistry, sid: str) -> list[dict[str, Any]]:
    return [e for e in (await registry.snapshot(sid)).events]


def _collapse(events: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for kind in types(events):
        if not (out and out[-1] == kind == "stream_delta"):
            out.append(kind)
    return out


async def _shown(agent_env: Any) -> list[tuple[str, str | None]]:
    return [(m.role, m.content) for m in await agent_env.messages()]


async def test_a_message_sent_during_a_tool_step_is_read_at_the_next_step(agent_env: Any, registry: RunRegistry) -> None:
    fake = agent_env.fake
    fake.script(tool_calls=TOOL, hang_before_first_chunk=0.5)
    fake.script(text="Your list is empty, and it is sunny.")
    run = await registry.start_turn(_req(agent_env, "What is on my list?"))
    await _model_asked(fake)
    item = await registry.steer(agent_env.session_id, content="Also tell me the weather.", user_id=agent_env.user.pk)
    assert item is not None and item.id.startswith("st_")
    assert [i.id for i in registry.pending_steers(agent_env.session_id)] == [item.id]
    result = await asyncio.wait_for(asyncio.shield(run.done), 20)
    assert result.outcome == "success" and result.content == "Your list is empty, and it is sunny."

    events = await _turn_events(registry, agent_env.session_id)
    assert _collapse(events) == ["stream_start", "tool_started", "tool_call", "steer_accepted", "stream_delta",
                                 "stream_end", "session_sync"]
    accepted = next(e for e in events if e["type"] == "steer_accepted")
    assert {k: accepted[k] for k in ("id", "content")} == {"id": item.id, "content": "Also tell me the weather."}
    shown = await _shown(agent_env)
    assert [r for r, _ in shown] == ["user", "assistant", "tool", "user", "assistant"]
    assert shown[3] == ("user", "Also tell me the weather.") and shown[4][1] == "Your list is empty, and it is sunny."
    # The model's second request ends with the message, after the tool's result.
    sent = fake.chat_requests[1].json["messages"]
    assert [m["role"] for m in sent[-2:]] == ["tool", "user"] and sent[-1]["content"] == "Also tell me the weather."
    assert registry.pending_steers(agent_env.session_id) == []


async def test_a_message_sent_while_the_answer_streams_gets_an_answer_of_its_own(
        agent_env: Any, registry: RunRegistry) -> None:
    fake = agent_env.fake
    first = "Here is a first answer that takes a while to stream."
    fake.script(text=first, token_size=4, delay_between_chunks=0.03)
    fake.script(text="Shorter: done.")
    run = await registry.start_turn(_req(agent_env, "Explain it"))
    await _model_asked(fake)
    await registry.steer(agent_env.session_id, content="Make it shorter.", user_id=agent_env.user.pk)
    result = await asyncio.wait_for(asyncio.shield(run.done), 20)
    assert result.content == "Shorter: done."
    assert await _shown(agent_env) == [("user", "Explain it"), ("assistant", first), ("user", "Make it shorter."),
                                       ("assistant", "Shorter: done.")]
    kinds = _collapse(await _turn_events(registry, agent_env.session_id))
    assert kinds == ["stream_start", "stream_delta", "steer_accepted", "stream_delta", "stream_end", "session_sync"]


async def test_a_withdrawn_message_is_never_read(agent_env: Any, registry: RunRegistry) -> None:
    fake = agent_env.fake
    fake.script(tool_calls=TOOL, hang_before_first_chunk=0.5)
    fake.script(text="Nothing on the list.")
    run = await registry.start_turn(_req(agent_env, "List?"))
    await _model_asked(fake)
    item = await registry.steer(agent_env.session_id, content="never mind", user_id=agent_env.user.pk)
    assert item is not None
    assert (await registry.withdraw_steer(agent_env.session_id, item.id)) == item
    assert await registry.withdraw_steer(agent_env.session_id, item.id) is None  # once
    await asyncio.wait_for(asyncio.shield(run.done), 20)
    kinds = types(await _turn_events(registry, agent_env.session_id))
    assert "steer_accepted" not in kinds and "steer_dropped" not in kinds
    assert "never mind" not in [c for _, c in await _shown(agent_env)]
    assert all("never mind" not in json.dumps(r.json) for r in fake.chat_requests)


async def test_stop_drops_the_queue_and_gives_the_text_back(agent_env: Any, registry: RunRegistry) -> None:
    fake = agent_env.fake
    fake.script(text="slow " * 60, token_size=5, delay_between_chunks=0.05)
    run = await registry.start_turn(_req(agent_env, "Go"))
    await _model_asked(fake)
    item = await registry.steer(agent_env.session_id, content="Actually, do X.", user_id=agent_env.user.pk)
    assert item is not None
    await registry.arequest_stop(agent_env.session_id)
    result = await asyncio.wait_for(asyncio.shield(run.done), 20)
    assert result.outcome == "stopped"
    events = await _turn_events(registry, agent_env.session_id)
    assert types(events)[-3:] == ["stream_stopped", "steer_dropped", "session_sync"]
    dropped = events[-2]
    assert (dropped["items"], dropped["reason"]) == ([{"id": item.id, "content": "Actually, do X."}], "stopped")
    assert "Actually, do X." not in [c for _, c in await _shown(agent_env)]
    assert registry.pending_steers(agent_env.session_id) == []


async def test_a_message_queued_after_the_last_step_is_given_back_when_the_turn_ends(registry: RunRegistry) -> None:
    sid, _, uid = await make_session()
    gate = asyncio.Event()
    registry.turn = scripted(StreamEnd(content="ok"), gate=gate, gate_after=0)  # reads no queue
    run = await registry.start_turn(TurnRequest(session_id=sid, text="hi", user_id=uid))
    item = await registry.steer(sid, content="late", user_id=uid)
    assert item is not None
    gate.set()
    await asyncio.wait_for(asyncio.shield(run.done), 10)
    events = (await registry.snapshot(sid)).events
    assert types(events) == ["stream_start", "stream_end", "steer_dropped", "session_sync"]
    assert events[2]["reason"] == "ended" and events[2]["items"] == [{"id": item.id, "content": "late"}]
    # The run's inbox is closed: nothing more can be queued for it.
    assert await registry.steer(sid, content="after", user_id=uid) is None


async def test_no_running_turn_nothing_is_queued(registry: RunRegistry) -> None:
    sid, _, uid = await make_session()
    assert await registry.steer(sid, content="hello?", user_id=uid) is None
    assert registry.pending_steers(sid) == []


class _Client:
    def __init__(self, user: Any) -> None:
        from django.test import AsyncClient

        from tests.support.users import token_for

        self.client = AsyncClient()
        self.headers = {"Authorization": f"Bearer {token_for(user)}"}

    async def post(self, path: str, body: Any) -> Any:
        return await self.client.post(path, data=json.dumps(body), content_type="application/json", headers=self.headers)

    async def get(self, path: str) -> Any:
        return await self.client.get(path, headers=self.headers)

    async def delete(self, path: str) -> Any:
        return await self.client.delete(path, headers=self.headers)


async def test_rest_steer_withdraw_and_bad_input(agent_env: Any, registry: RunRegistry) -> None:
    from tests.support.users import make_user

    sid = agent_env.session_id
    client = await sync_to_async(_Client)(agent_env.user)
    resp = await client.post(f"/sessions/{sid}/steer", {"content": "hello"})
    assert resp.status_code == 409
    assert resp.json()["detail"].startswith("No turn is running in this session, so there is nothing to steer")

    agent_env.fake.script(text="slow " * 400, token_size=5, delay_between_chunks=0.05)  # 20 s: stopped below
    run = await registry.start_turn(_req(agent_env))
    await _model_asked(agent_env.fake)
    resp = await client.post(f"/sessions/{sid}/steer", {"content": "focus on costs", "ref": "r1"})
    assert resp.status_code == 202, resp.content
    queued = resp.json()
    assert (queued["content"], queued["status"]) == ("focus on costs", "queued")
    listed = (await client.get(f"/sessions/{sid}/steer")).json()
    assert listed == [queued]
    detail = (await client.get(f"/sessions/{sid}")).json()
    assert detail["pending_steers"] == [{"id": queued["id"], "content": "focus on costs"}]

    for body, detail_start in (({"content": "   "}, "The message is empty"),
                               ({"content": "x" * 100_001}, "The message has 100001 characters: the limit is 100000.")):
        resp = await client.post(f"/sessions/{sid}/steer", body)
        assert resp.status_code == 400 and resp.json()["detail"].startswith(detail_start)
    mallory = await sync_to_async(make_user)("mallory")
    other = await sync_to_async(_Client)(mallory)
    for resp in (await other.post(f"/sessions/{sid}/steer", {"content": "hijack"}),
                 await other.delete(f"/sessions/{sid}/steer/{queued['id']}"),
                 await other.get(f"/sessions/{sid}/steer")):
        assert resp.status_code == 404 and resp.json()["detail"] == f"Session {sid} not found."
    resp = await client.delete(f"/sessions/{sid}/steer/st_nope")
    assert (resp.status_code, resp.json()["detail"]) == (404, STEER_GONE)
    resp = await client.delete(f"/sessions/{sid}/steer/{queued['id']}")
    assert resp.status_code == 200 and resp.json()["status"] == "withdrawn"
    assert (await client.get(f"/sessions/{sid}/steer")).json() == []

    for n in range(MAX_QUEUED):
        resp = await client.post(f"/sessions/{sid}/steer", {"content": f"note {n}"})
        assert resp.status_code == 202, resp.content
    resp = await client.post(f"/sessions/{sid}/steer", {"content": "one too many"})
    assert resp.status_code == 409 and resp.json()["detail"].startswith("Too many messages are waiting")
    await registry.arequest_stop(sid)
    await asyncio.wait_for(asyncio.shield(run.done), 20)
    dropped = [e for e in (await registry.snapshot(sid)).events if e["type"] == "steer_dropped"]
    assert [i["content"] for i in dropped[0]["items"]] == [f"note {n}" for n in range(MAX_QUEUED)]


async def test_websocket_steering_frames_and_bad_input(agent_env: Any, registry: RunRegistry) -> None:
    from tests.support.users import token_for

    sid = agent_env.session_id
    token = await sync_to_async(token_for)(agent_env.user)
    comm = await connect(sid, token)
    assert (await comm.receive_json_from())["type"] == "session_sync"
    agent_env.fake.script(text="slow " * 120, token_size=5, delay_between_chunks=0.05)  # 6 s
    agent_env.fake.script(text="Answer to the note.")
    await comm.send_json_to({"type": "message", "content": "start"})
    await receive_until(comm, "stream_start")
    await _model_asked(agent_env.fake)  # past the first step's boundary: a note waits for the next one

    await comm.send_json_to({"type": "message", "content": "with a picture", "images": [_PNG]})
    error = await receive_until(comm, "error")
    assert error[-1]["message"].startswith("Images and files cannot be added to a running turn")

    await comm.send_json_to({"type": "message", "content": "a note", "ref": "r-7"})
    queued = (await receive_until(comm, "steer_queued"))[-1]
    assert (queued["content"], queued["ref"]) == ("a note", "r-7")

    # Another user's socket (on her own session) cannot withdraw it: an error there, her connection stays.
    m_sid, m_token, _ = await make_session("mallory", staff=False)
    other = await connect(m_sid, m_token)
    assert (await other.receive_json_from())["type"] == "session_sync"
    await other.send_json_to({"type": "steer_withdraw", "id": queued["id"]})
    refused = await receive_until(other, "error")
    assert refused[-1] == {"type": "error", "message": STEER_GONE, "frame": "steer_withdraw", "ref": queued["id"]}
    await other.send_json_to({"type": "steer_withdraw", "id": ""})
    assert (await receive_until(other, "error"))[-1]["message"].startswith("Invalid message: id:")
    await other.send_json_to({"type": "visibility", "visible": True})
    assert await other.receive_nothing(timeout=0.2)  # still connected, nothing went wrong
    assert [i.id for i in registry.pending_steers(sid)] == [queued["id"]]

    await comm.send_json_to({"type": "steer_withdraw", "id": queued["id"]})
    withdrawn = (await receive_until(comm, "steer_withdrawn"))[-1]
    assert withdrawn == {"type": "steer_withdrawn", "id": queued["id"]}
    await comm.send_json_to({"type": "message", "content": "the real note"})
    queued = (await receive_until(comm, "steer_queued"))[-1]
    events = await receive_until(comm, "session_sync", timeout=20)
    accepted = [e for e in events if e["type"] == "steer_accepted"]
    assert [(e["id"], e["content"]) for e in accepted] == [(queued["id"], "the real note")]
    assert types(events)[-2] == "stream_end" and events[-2]["content"] == "Answer to the note."

    # No turn runs now: the same frame starts a normal turn.
    agent_env.fake.script(text="Fresh turn.")
    await comm.send_json_to({"type": "message", "content": "new question"})
    events = await receive_until(comm, "session_sync", timeout=20)
    assert types(events)[0] == "stream_start" and "steer_queued" not in types(events)
    await drain(comm)
    await comm.disconnect()
    await other.disconnect()


@pytest.mark.scaleout
async def test_a_message_queued_in_another_process_reaches_the_run(agent_env: Any, registry: RunRegistry) -> None:
    """Two registries on the same Redis stand for two ASGI processes: B queues, A's run reads it."""
    fake = agent_env.fake
    fake.script(tool_calls=TOOL, hang_before_first_chunk=0.5)
    fake.script(text="Noted.")
    run = await registry.start_turn(_req(agent_env))
    await _model_asked(fake)
    elsewhere = RunRegistry()
    assert elsewhere.runs == {} and await elsewhere.ais_busy(agent_env.session_id)
    item = await elsewhere.steer(agent_env.session_id, content="from another process", user_id=agent_env.user.pk)
    assert item is not None
    assert [i.id for i in elsewhere.pending_steers(agent_env.session_id)] == [item.id]
    await asyncio.wait_for(asyncio.shield(run.done), 20)
    assert ("user", "from another process") in await _shown(agent_env)
    assert "steer_accepted" in types(await _turn_events(registry, agent_env.session_id))


_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
