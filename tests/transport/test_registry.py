"""Run registry mechanics with scripted turn functions (in-process; both tiers).

Embedded tier: LocalStore + in-memory channel layer. Scale-out tier: RedisStore +
channels-redis, so the same assertions cover the Redis keys.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.events import Error, StreamDelta, StreamEnd, ThinkingDelta, ToolCall, ToolStarted
from sessions_app import bus
from sessions_app.runs import (
    RunRegistry,
    SessionBusy,
    TurnRequest,
    get_run_registry,
    run_recall_turn,
    run_recall_turn_blocking,
)
from tests.transport.helpers import connect, drain, make_session, receive_until, scripted, simple_answer, types

pytestmark = pytest.mark.django_db(transaction=True)


async def _log_has(registry: RunRegistry, sid: str, n: int) -> None:
    for _ in range(500):
        if len((await registry.snapshot(sid)).events) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the log never reached {n} events")


def _req(sid: str, uid: int, text: str = "hi") -> TurnRequest:
    return TurnRequest(session_id=sid, text=text, user_id=uid, user_role="staff")


async def test_events_are_numbered_logged_and_fanned_out(registry: RunRegistry) -> None:
    sid, token, uid = await make_session()
    registry.turn = scripted(*simple_answer())
    comm = await connect(sid, token)
    assert await comm.receive_json_from() == {"type": "session_sync"}  # idle on connect
    result = await registry.run_turn(_req(sid, uid))
    assert result.outcome == "success" and result.content == "Hello there, friend."
    events = await receive_until(comm, "session_sync")
    assert types(events)[0] == "stream_start" and types(events)[-2:] == ["stream_end", "session_sync"]
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(events)))
    assert "".join(e["delta"] for e in events if e["type"] == "stream_delta") == "Hello there, friend."
    snap = await registry.snapshot(sid)
    assert snap.active is False and snap.events == events  # the log is exactly what went live
    # seq is per session and keeps growing across turns (so ?after=N works across turns)
    await registry.run_turn(_req(sid, uid))
    second = await receive_until(comm, "session_sync")
    assert second[0]["seq"] == seqs[-1] + 1
    await comm.disconnect()


async def test_deltas_are_coalesced_without_changing_text_or_order(registry: RunRegistry, settings: Any) -> None:
    settings.WS_DELTA_COALESCE_MS = 10_000  # everything of one kind in a row merges
    sid, token, uid = await make_session()
    registry.turn = scripted(*simple_answer("abcdefghijklmnopqrstuvwxyz", "thinking hard"))
    comm = await connect(sid, token)
    await comm.receive_json_from()
    await registry.run_turn(_req(sid, uid))
    events = await receive_until(comm, "session_sync")
    assert types(events) == ["stream_start", "thinking_delta", "thinking_end", "stream_delta", "stream_end",
                             "session_sync"]
    assert events[1]["delta"] == "thinking hard" and events[3]["delta"] == "abcdefghijklmnopqrstuvwxyz"
    await comm.disconnect()


async def test_pending_delta_flushes_when_the_window_closes(registry: RunRegistry, settings: Any) -> None:
    settings.WS_DELTA_COALESCE_MS = 30
    sid, token, uid = await make_session()
    gate = asyncio.Event()
    registry.turn = scripted(StreamDelta(delta="a"), StreamDelta(delta="b"), StreamDelta(delta="c"),
                             StreamEnd(content="abc"), gate=gate, gate_after=2)
    comm = await connect(sid, token)
    await comm.receive_json_from()
    run = await registry.start_turn(_req(sid, uid))
    first = await receive_until(comm, "stream_delta", timeout=2)  # flushed by the timer, not by a new event
    assert first[-1]["delta"] == "ab"
    gate.set()
    rest = await receive_until(comm, "session_sync")
    assert [e.get("delta") for e in rest if e["type"] == "stream_delta"] == ["c"]
    await run.done
    await comm.disconnect()


async def test_mid_turn_connect_replays_then_goes_live_without_gap_or_duplicate(registry: RunRegistry) -> None:
    sid, token, uid = await make_session()
    gate = asyncio.Event()
    registry.turn = scripted(ThinkingDelta(delta="x"), ToolStarted(tool="todo", args={}),
                             ToolCall(tool="todo", args={}, result="ok", success=True),
                             StreamDelta(delta="done"), StreamEnd(content="done"), gate=gate, gate_after=3)
    run = await registry.start_turn(_req(sid, uid))
    await _log_has(registry, sid, 4)
    first = (await registry.snapshot(sid)).events[0]["seq"]
    late = await connect(sid, token)
    partial = await connect(sid, token, after=first + 1)
    replayed = await drain(late)
    assert types(replayed) == ["stream_start", "thinking_delta", "tool_started", "tool_call"]
    assert [e["seq"] for e in await drain(partial)] == [first + 2, first + 3]
    gate.set()
    live = await receive_until(late, "session_sync")
    all_seqs = [e["seq"] for e in replayed + live]
    assert all_seqs == list(range(all_seqs[0], all_seqs[0] + len(all_seqs)))  # no gap, no duplicate
    await run.done
    await late.disconnect()
    await partial.disconnect()


async def test_after_n_gets_exactly_the_events_after_n(registry: RunRegistry) -> None:
    sid, token, uid = await make_session()
    gate = asyncio.Event()
    registry.turn = scripted(*[StreamDelta(delta=str(i)) for i in range(6)], StreamEnd(content="012345"),
                             gate=gate, gate_after=6)
    run = await registry.start_turn(_req(sid, uid))
    await _log_has(registry, sid, 7)
    first = (await registry.snapshot(sid)).events[0]["seq"]
    comm = await connect(sid, token, after=first + 3)
    got = await drain(comm)
    assert [e["seq"] for e in got] == [first + 4, first + 5, first + 6]
    gate.set()
    tail = await receive_until(comm, "session_sync")
    assert types(tail) == ["stream_end", "session_sync"] and tail[0]["seq"] == first + 7
    await run.done
    # idle and fully caught up: only session_sync
    caught_up = await connect(sid, token, after=tail[-1]["seq"])
    assert await drain(caught_up) == [{"type": "session_sync"}]
    await comm.disconnect()
    await caught_up.disconnect()


def _lose(monkeypatch: pytest.MonkeyPatch, lost: Any) -> list[dict[str, Any]]:
    """Make the channel layer lose the events for which ``lost(n, event)`` is true (n counts the
    events published from 0); the run's log still gets them. Returns the lost events.

    Scale-out logs and publishes an event in one Redis command: there a lost event is published
    to a channel nobody subscribes to, as a PUBLISH during a subscriber's reconnect would be."""
    real, real_publication = bus._send, bus.redis_publication
    published: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []

    def drops(event: dict[str, Any]) -> bool:
        published.append(event)
        if lost(len(published) - 1, event):
            dropped.append(event)
            return True
        return False

    async def lossy(layer: Any, session_id: Any, event: dict[str, Any]) -> None:
        if not drops(event):
            await real(layer, session_id, event)

    def lossy_publication(session_id: Any, event: dict[str, Any], **kw: Any) -> tuple[str, bytes] | None:
        target = real_publication(session_id, event, **kw)
        if target is not None and drops(event):
            return "navi-test-nobody-listens", target[1]
        return target

    monkeypatch.setattr(bus, "_send", lossy)
    monkeypatch.setattr(bus, "redis_publication", lossy_publication)
    return dropped


async def test_events_lost_by_the_layer_are_sent_from_the_log_in_order(registry: RunRegistry,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    sid, token, uid = await make_session()
    registry.turn = scripted(*simple_answer())
    comm = await connect(sid, token)
    assert await comm.receive_json_from() == {"type": "session_sync"}
    dropped = _lose(monkeypatch, lambda n, e: n in (2, 3, 9))  # two thinking deltas in a row, a text delta
    await registry.run_turn(_req(sid, uid))
    events = await receive_until(comm, "session_sync")
    assert [e["type"] for e in dropped] == ["thinking_delta", "thinking_delta", "stream_delta"]
    assert events == (await registry.snapshot(sid)).events  # every event once, in order
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(events)))
    assert await drain(comm) == []  # and nothing twice afterwards
    await comm.disconnect()


async def test_a_turn_whose_last_events_were_lost_still_ends(registry: RunRegistry,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sessions_app.consumers.TAIL_CHECK_S", 0.2)
    sid, token, uid = await make_session()
    registry.turn = scripted(*simple_answer())
    comm = await connect(sid, token)
    await comm.receive_json_from()
    dropped = _lose(monkeypatch, lambda n, e: e["type"] in ("stream_end", "session_sync"))
    await registry.run_turn(_req(sid, uid))
    events = await receive_until(comm, "session_sync", timeout=3)  # from the log: no live event follows
    assert types(dropped) == ["stream_end", "session_sync"]
    assert events == (await registry.snapshot(sid)).events
    assert await drain(comm, quiet=0.5) == []  # the turn is over: no more checks, no second session_sync
    await comm.disconnect()


async def test_a_run_that_ended_without_session_sync_ends_with_one(registry: RunRegistry,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's session_sync reached neither the log nor the layer (its process died): once the
    run is no longer active, the client gets a session_sync anyway and reloads from REST."""
    monkeypatch.setattr("sessions_app.consumers.TAIL_CHECK_S", 0.2)
    sid, token, uid = await make_session()
    registry.turn = scripted(*simple_answer())
    comm = await connect(sid, token)
    await comm.receive_json_from()
    _lose(monkeypatch, lambda n, e: e["type"] == "session_sync")
    real_append = registry.store.append
    real_fused = getattr(registry.store, "append_and_publish", None)

    async def append(session_id: str, seq: int, event: dict[str, Any]) -> None:
        if event["type"] != "session_sync":
            await real_append(session_id, seq, event)

    async def fused(session_id: str, seq: int, event: dict[str, Any], *publication: Any) -> None:
        if event["type"] != "session_sync":
            assert real_fused is not None
            await real_fused(session_id, seq, event, *publication)

    monkeypatch.setattr(registry.store, "append", append)
    if real_fused is not None:  # scale-out: the log entry and the publish are one command
        monkeypatch.setattr(registry.store, "append_and_publish", fused)
    await registry.run_turn(_req(sid, uid))
    events = await receive_until(comm, "session_sync", timeout=3)
    assert types(events)[-2:] == ["stream_end", "session_sync"] and "seq" not in events[-1]
    assert await drain(comm, quiet=0.5) == []
    await comm.disconnect()


async def test_busy_session_refuses_a_second_turn_and_queues_a_message_for_it(registry: RunRegistry) -> None:
    from sessions_app.models import Message

    sid, token, uid = await make_session()
    gate = asyncio.Event()
    registry.turn = scripted(StreamDelta(delta="a"), StreamEnd(content="a"), gate=gate, gate_after=1)
    run = await registry.start_turn(_req(sid, uid))
    with pytest.raises(SessionBusy):
        await registry.start_turn(_req(sid, uid))
    assert get_run_registry().is_busy(sid) and await registry.ais_busy(sid)
    comm = await connect(sid, token)
    await drain(comm)
    await comm.send_json_to({"type": "message", "content": "second"})
    events = await drain(comm)
    # Not refused: it waits for the running turn's next step (steering); this scripted turn reads no
    # queue, so the message comes back when the turn ends.
    assert [(e["type"], e["content"], e["ref"]) for e in events] == [("steer_queued", "second", None)]
    assert await sync_to_async(Message.objects.filter(session_id=sid).count)() == 0
    assert await run_recall_turn(sid, user_id=uid, content="recall") == "busy"
    gate.set()
    await run.done
    dropped = [e for e in (await registry.snapshot(sid)).events if e["type"] == "steer_dropped"]
    assert dropped[0]["items"] == [{"id": events[0]["id"], "content": "second"}] and dropped[0]["reason"] == "ended"
    assert not registry.is_busy(sid)
    await comm.disconnect()


async def test_stop_is_cooperative_and_works_by_frame_and_by_call(registry: RunRegistry) -> None:
    sid, token, uid = await make_session()
    registry.turn = scripted(StreamDelta(delta="a"), StreamEnd(content="a"), gate=asyncio.Event(), gate_after=1)
    run = await registry.start_turn(_req(sid, uid))
    comm = await connect(sid, token)
    await comm.send_json_to({"type": "stop"})
    events = await receive_until(comm, "session_sync")
    assert types(events)[-2:] == ["stream_stopped", "session_sync"]
    assert (await run.done).outcome == "stopped"
    assert registry.request_stop(sid) is False  # nothing runs any more
    run = await registry.start_turn(_req(sid, uid))
    assert await registry.arequest_stop(sid) is True
    assert (await run.done).outcome == "stopped"
    await comm.disconnect()


async def test_run_outlives_its_connection(registry: RunRegistry) -> None:
    sid, token, uid = await make_session()
    gate = asyncio.Event()
    registry.turn = scripted(StreamDelta(delta="a"), StreamEnd(content="a"), gate=gate, gate_after=1)
    comm = await connect(sid, token)
    await drain(comm)
    await comm.send_json_to({"type": "message", "content": "go"})
    await receive_until(comm, "stream_delta")
    await comm.disconnect()
    gate.set()
    run = registry.runs.get(sid)
    assert run is not None and (await run.done).outcome == "success"


async def test_turn_exception_becomes_error_event_and_releases_the_session(registry: RunRegistry) -> None:
    sid, token, uid = await make_session()

    async def broken(session_id: str, text: str, **kw: Any) -> Any:
        yield StreamDelta(delta="a")
        raise RuntimeError("boom")

    registry.turn = broken
    comm = await connect(sid, token)
    await drain(comm)
    result = await registry.run_turn(_req(sid, uid))
    assert result.outcome.startswith("error: ") and "boom" in result.outcome
    events = await receive_until(comm, "session_sync")
    assert types(events) == ["stream_start", "stream_delta", "error", "session_sync"]
    assert not registry.is_busy(sid)
    await comm.disconnect()


async def test_recall_outcomes(registry: RunRegistry) -> None:
    sid, _, uid = await make_session()
    registry.turn = scripted(*simple_answer())
    assert await run_recall_turn(sid, user_id=uid, content="do it") == "success"
    registry.turn = scripted(StreamEnd(content="limit", finish_reason="max_iterations"))
    assert await run_recall_turn(sid, user_id=uid, content="do it") == "max_iterations"
    registry.turn = scripted(Error(message="Ollama is not reachable"))
    assert await run_recall_turn(sid, user_id=uid, content="do it") == "error: Ollama is not reachable"
    seen: dict[str, Any] = {}

    async def spy(session_id: str, text: str, **kw: Any) -> Any:
        seen.update(kw, text=text)
        yield StreamEnd(content="ok")

    registry.turn = spy
    assert await run_recall_turn(sid, user_id=uid, content="recall text") == "success"
    assert seen["is_recall"] is True and seen["user_role"] == "staff" and seen["text"] == "recall text"


async def test_recall_from_a_worker_thread_runs_on_the_server_loop(registry: RunRegistry) -> None:
    sid, token, uid = await make_session()
    loops: list[Any] = []

    async def turn(session_id: str, text: str, **kw: Any) -> Any:
        loops.append(asyncio.get_running_loop())
        yield StreamEnd(content="ok")

    registry.turn = turn
    comm = await connect(sid, token)
    assert (await comm.receive_json_from(timeout=10))["type"] == "session_sync"  # the idle greeting
    bus.register_server_loop(asyncio.get_running_loop())
    try:
        outcome: list[str] = []
        worker = threading.Thread(target=lambda: outcome.append(
            run_recall_turn_blocking(sid, user_id=uid, content="wake up")))
        worker.start()
        events = await receive_until(comm, "session_sync")
        await asyncio.get_running_loop().run_in_executor(None, worker.join, 5)
    finally:
        bus.register_server_loop(None)  # type: ignore[arg-type]
    assert outcome == ["success"] and loops == [asyncio.get_running_loop()]
    assert types(events) == ["stream_start", "stream_end", "session_sync"]
    await comm.disconnect()


async def test_heartbeat_after_silence(registry: RunRegistry, settings: Any) -> None:
    settings.WS_HEARTBEAT_SECONDS = 0.2
    sid, token, _ = await make_session()
    comm = await connect(sid, token)
    assert await comm.receive_json_from() == {"type": "session_sync"}
    assert await comm.receive_json_from(timeout=2) == {"type": "heartbeat"}
    assert await comm.receive_json_from(timeout=2) == {"type": "heartbeat"}
    await comm.disconnect()


async def test_busy_flag_in_session_list(registry: RunRegistry) -> None:
    from django.test import AsyncClient

    sid, token, uid = await make_session()
    gate = asyncio.Event()
    registry.turn = scripted(StreamEnd(content="a"), gate=gate, gate_after=0)
    run = await registry.start_turn(_req(sid, uid))
    client = AsyncClient()
    auth = {"Authorization": f"Bearer {token}"}
    body = (await client.get("/sessions", headers=auth)).json()
    assert [s["busy"] for s in body["items"] if s["id"] == sid] == [True]
    gate.set()
    await run.done
    body = (await client.get("/sessions", headers=auth)).json()
    assert [s["busy"] for s in body["items"] if s["id"] == sid] == [False]


async def test_a_timed_flush_in_process_numbers_logs_and_sends_without_a_task(settings: Any) -> None:
    from sessions_app.runs.store import LocalStore, RedisStore
    from sessions_app.runs.writer import EventWriter

    sid, token, _ = await make_session()
    comm = await connect(sid, token)
    await comm.receive_json_from()
    store = RedisStore(settings.REDIS_URL) if getattr(settings, "REDIS_URL", "") else LocalStore()
    writer = EventWriter(store, sid, "r1", coalesce_ms=30, first_seq=await store.begin_log(sid))
    await writer.push(StreamDelta(delta="a").to_dict())
    await writer.push(StreamDelta(delta="b").to_dict())
    if isinstance(store, RedisStore):  # the log is in Redis: only the awaited flush can write it
        assert writer.flush_now() is False and writer.deadline is not None  # nothing taken
        await writer.flush()
    else:
        assert writer.flush_now() is True and writer.deadline is None
    sent = await comm.receive_json_from()
    assert sent["type"] == "stream_delta" and sent["delta"] == "ab"
    assert (await store.snapshot(sid)).events == [sent]
    await comm.disconnect()


async def test_a_finished_turns_log_is_kept_packed_and_reads_back_the_same() -> None:
    """Embedded mode keeps a finished turn's log as one JSON array (for ?after=N reconnects):
    snapshot and tail read back exactly the events that were logged, whatever they hold."""
    from sessions_app.runs.store import LocalStore

    store = LocalStore()
    sid = "s1"
    assert await store.acquire(sid, "r1")
    first = await store.begin_log(sid)
    events = [{"type": "stream_start", "seq": first + 1},
              {"type": "stream_delta", "delta": "héllo ✓ \ud800 lone", "seq": first + 2},
              {"type": "tool_call", "tool": "t", "args": {"n": 2**70, "x": [1.5, None, True]}, "seq": first + 3},
              {"type": "session_sync", "seq": first + 4}]
    for event in events:
        store.append_now(sid, event["seq"], event)
    live = await store.snapshot(sid)
    await store.release(sid, "r1")
    state = store._sessions[sid]
    assert state.log == [] and state.packed  # packed once the run ended
    done = await store.snapshot(sid)
    assert live.active and not done.active
    assert done.events == live.events == events and done.last_seq == first + 4
    assert (await store.tail(sid, first + 2)).events == events[2:]
    assert (await store.tail(sid, first + 4)).events == []
    assert await store.acquire(sid, "r2")  # the next turn starts a fresh log
    await store.begin_log(sid)
    assert (await store.snapshot(sid)).events == []


async def test_a_running_turn_takes_back_a_lock_that_redis_lost(registry: RunRegistry, settings: Any) -> None:
    """Scale-out: Redis restarts empty while a turn runs. Within one stop poll the session is busy
    again, held by that run, so another process does not start a second turn in the session."""
    from sessions_app.runs.store import STOP_POLL_S, RedisStore, _key

    if not isinstance(registry.store, RedisStore):
        pytest.skip("scale-out tier only (the run's lock lives in Redis)")
    import redis.asyncio as aioredis

    sid, _, uid = await make_session()
    gate = asyncio.Event()
    registry.turn = scripted(StreamEnd(content="a"), gate=gate, gate_after=0)
    run = await registry.start_turn(_req(sid, uid))
    client = aioredis.Redis.from_url(settings.REDIS_URL)
    lock = _key(sid, "lock")
    try:
        await client.delete(lock)  # what a restart of an empty Redis leaves
        for _ in range(round(5 * STOP_POLL_S / 0.01)):
            if await client.get(lock) == run.run_id.encode():
                break
            await asyncio.sleep(0.01)
        assert await client.get(lock) == run.run_id.encode()
        with pytest.raises(SessionBusy):
            await registry.start_turn(_req(sid, uid, "a second turn"))
    finally:
        gate.set()
        await run.done
        await client.aclose()
    assert not await registry.ais_busy(sid)


async def test_a_watcher_that_outlives_its_cancel_leaves_the_ended_turns_session_idle(
        registry: RunRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scale-out: a turn fails while its watcher's stop poll waits for Redis, and the cancel of that
    poll is lost: Python 3.11's asyncio.wait_for, which redis-py awaits replies through, returns the
    reply instead of raising when it came in before the cancelled wait resumed (a loop blocked by a
    long log write makes that likely; the PostgreSQL fault test met it). The poll takes back a lock that
    vanished, so a poll after the release used to hold the session for 30 s for a turn that was
    over. The user was told the turn failed: a client that connects now must find the session
    idle, and the message sent again must be answered, not refused as "already running"."""
    from sessions_app.runs.store import STOP_POLL_S, RedisStore

    if not isinstance(registry.store, RedisStore):
        pytest.skip("scale-out tier only (the stop poll takes back a lock that Redis lost)")
    polling = asyncio.Event()
    lost: list[str] = []
    real_poll = registry.store.stop_requested

    async def poll(session_id: str, run_id: str) -> bool:
        if not lost:
            polling.set()
            try:
                await asyncio.sleep(30)  # the reply is on its way when the turn ends...
            except asyncio.CancelledError:
                lost.append(run_id)  # ...and comes with the cancel, which is lost
                return False
        return await real_poll(session_id, run_id)

    monkeypatch.setattr(registry.store, "stop_requested", poll)
    texts: list[str] = []

    async def turn(session_id: str, text: str, **kw: Any) -> Any:
        texts.append(text)
        if len(texts) == 1:
            await polling.wait()
            yield Error(message="The model server went away.")
            return
        yield StreamDelta(delta="Back.")
        yield StreamEnd(content="Back.")

    registry.turn = turn
    sid, token, _ = await make_session()
    comm = await connect(sid, token)
    await drain(comm)
    await comm.send_json_to({"type": "message", "content": "Are you there?"})
    assert types(await receive_until(comm, "session_sync")) == ["stream_start", "error", "session_sync"]
    await comm.disconnect()
    assert lost  # the case of this test: the watcher's cancel was lost
    await asyncio.sleep(3 * STOP_POLL_S)  # a watcher still alive polls in this time
    again = await connect(sid, token)
    assert await again.receive_json_from() == {"type": "session_sync"}  # idle, not the ended turn replayed
    await again.send_json_to({"type": "message", "content": "Are you there?"})
    assert types(await receive_until(again, "session_sync")) == ["stream_start", "stream_delta", "stream_end",
                                                                 "session_sync"]
    assert texts == ["Are you there?", "Are you there?"]  # each sending ran once
    assert not await registry.ais_busy(sid)
    await again.disconnect()
