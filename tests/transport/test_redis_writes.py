"""Scale-out event writes against the machine's Redis: commands pipelined per loop in call order,
each caller with its own reply or error; a run's event logged and published in one command."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from redis import asyncio as aioredis
from redis.exceptions import ResponseError

from sessions_app.redis_batch import CommandBatcher

pytestmark = pytest.mark.scaleout


def _batcher(url: str) -> CommandBatcher:
    return CommandBatcher(lambda: aioredis.Redis.from_url(url), close=lambda r: r.aclose())


def test_concurrent_callers_get_their_own_replies_in_call_order(settings: Any) -> None:
    key = f"navi-test:{uuid.uuid4().hex}"

    async def run() -> tuple[list[Any], list[bytes], int]:
        batcher = _batcher(settings.REDIS_URL)
        try:
            replies = await asyncio.gather(*(batcher.call("RPUSH", key, str(i)) for i in range(200)))
            stored = await batcher.call("LRANGE", key, 0, -1)
            # Calls made while a round trip is in flight go out together in the next one.
            pipelines = 0
            real_pipeline = batcher.redis.pipeline  # type: ignore[union-attr]

            def counting(*args: Any, **kwargs: Any) -> Any:
                nonlocal pipelines
                pipelines += 1
                return real_pipeline(*args, **kwargs)

            batcher.redis.pipeline = counting  # type: ignore[union-attr,method-assign]
            await asyncio.gather(*(batcher.call("GET", key + ":x") for _ in range(50)))
            await batcher.call("DEL", key)
            return replies, stored, pipelines
        finally:
            await batcher.close()

    replies, stored, pipelines = asyncio.run(run())
    assert replies == list(range(1, 201))  # RPUSH's new length: one reply each, in order
    assert stored == [str(i).encode() for i in range(200)]
    assert pipelines <= 3  # 50 calls in one go: not one round trip each


def test_a_failing_command_fails_its_caller_only(settings: Any) -> None:
    key = f"navi-test:{uuid.uuid4().hex}"

    async def run() -> list[Any]:
        batcher = _batcher(settings.REDIS_URL)
        try:
            await batcher.call("SET", key, "text")
            return await asyncio.gather(batcher.call("GET", key), batcher.call("LPUSH", key, "x"),
                                        batcher.call("GET", key), batcher.call("DEL", key), return_exceptions=True)
        finally:
            await batcher.close()

    got, wrong_type, again, deleted = asyncio.run(run())
    assert got == b"text" and again == b"text" and deleted == 1
    assert isinstance(wrong_type, ResponseError) and "WRONGTYPE" in str(wrong_type)


def test_an_unreachable_redis_fails_every_caller_and_the_batcher_recovers(settings: Any) -> None:
    from tests.support.live import free_port

    url = {"now": f"redis://127.0.0.1:{free_port()}/0"}

    async def run() -> tuple[list[Any], Any]:
        batcher = CommandBatcher(lambda: aioredis.Redis.from_url(url["now"], socket_connect_timeout=2),
                                 close=lambda r: r.aclose())
        try:
            failed = await asyncio.gather(*(batcher.call("PING") for _ in range(3)), return_exceptions=True)
            batcher.redis, url["now"] = None, settings.REDIS_URL  # the next batch connects anew
            return failed, await batcher.call("PING")
        finally:
            await batcher.close()

    failed, pong = asyncio.run(run())
    assert all(isinstance(e, ConnectionError | OSError) or "connect" in str(e).lower() for e in failed), failed
    assert pong is True


def test_an_event_is_logged_and_published_in_one_command(settings: Any) -> None:
    from sessions_app.runs.store import RedisStore

    sid = str(uuid.uuid4())
    channel = f"navi-test:{uuid.uuid4().hex}"

    async def run() -> tuple[Any, Any, list[bytes]]:
        store = RedisStore(settings.REDIS_URL)
        listener = aioredis.Redis.from_url(settings.REDIS_URL)
        pubsub = listener.pubsub()
        await pubsub.subscribe(channel)
        await pubsub.get_message(timeout=1)  # the subscribe confirmation
        try:
            first = await store.begin_log(sid)
            event = {"type": "stream_delta", "delta": "héllo \U0001f600", "seq": first + 1}
            await store.append_and_publish(sid, first + 1, event, channel, b"payload-1")
            await store.append(sid, first + 2, {"type": "stream_end", "content": "x", "seq": first + 2})
            received = []
            for _ in range(20):
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
                if message is not None:
                    received.append(message["data"])
            return await store.snapshot(sid), await store.tail(sid, first + 1), received
        finally:
            await pubsub.aclose()
            await listener.aclose()

    snap, tail, received = asyncio.run(run())
    assert [e["type"] for e in snap.events] == ["stream_delta", "stream_end"]
    assert snap.events[0]["delta"] == "héllo \U0001f600"
    assert snap.last_seq == snap.events[-1]["seq"]
    assert [e["type"] for e in tail.events] == ["stream_end"]
    assert received == [b"payload-1"]  # the plain append publishes nothing


@pytest.mark.django_db(transaction=True)
async def test_a_scale_out_run_logs_and_publishes_each_event_in_one_command(monkeypatch: pytest.MonkeyPatch,
                                                                           settings: Any) -> None:
    """The writer takes the one-command path when the layer is on the store's Redis, and the
    client still gets every event once, in order, equal to the log."""
    from sessions_app.runs import RunRegistry, TurnRequest, set_run_registry
    from sessions_app.runs.store import RedisStore
    from tests.transport.helpers import connect, make_session, receive_until, scripted, simple_answer

    settings.WS_DELTA_COALESCE_MS = 0
    fused: list[str] = []
    real = RedisStore.append_and_publish

    async def counted(self: RedisStore, session_id: str, seq: int, event: dict[str, Any], *rest: Any) -> None:
        fused.append(event["type"])
        await real(self, session_id, seq, event, *rest)

    async def plain(*args: Any) -> None:
        raise AssertionError("the two-command path was taken")

    monkeypatch.setattr(RedisStore, "append_and_publish", counted)
    monkeypatch.setattr(RedisStore, "append", plain)
    registry = RunRegistry()
    set_run_registry(registry)
    try:
        sid, token, uid = await make_session()
        registry.turn = scripted(*simple_answer())
        comm = await connect(sid, token)
        assert await comm.receive_json_from() == {"type": "session_sync"}
        await registry.run_turn(TurnRequest(session_id=sid, text="hi", user_id=uid))
        events = await receive_until(comm, "session_sync")
        await comm.disconnect()
    finally:
        set_run_registry(None)
    assert [e["type"] for e in events] == fused
    assert events == (await registry.snapshot(sid)).events


@pytest.mark.django_db(transaction=True)
async def test_an_event_the_layer_cannot_encode_is_still_logged_and_the_turn_goes_on(settings: Any) -> None:
    """msgpack refuses integers beyond 64 bits and lone surrogates; the log (JSON) takes them: the
    event is logged, only its live publish fails, and the events after it go out as usual."""
    from sessions_app.runs.store import RedisStore
    from sessions_app.runs.writer import EventWriter
    from tests.transport.helpers import connect, make_session, receive_until

    sid, token, _ = await make_session()
    comm = await connect(sid, token)
    assert await comm.receive_json_from() == {"type": "session_sync"}
    store = RedisStore(settings.REDIS_URL)
    writer = EventWriter(store, sid, "r1", coalesce_ms=0, first_seq=await store.begin_log(sid))
    odd = [{"type": "tool_started", "tool": "t", "args": {"n": 2**70}},
           {"type": "stream_delta", "delta": "lone \ud83d half"}]
    for event in [*odd, {"type": "stream_delta", "delta": "fine"}, {"type": "session_sync"}]:
        await writer.push(event)  # never raises
    logged = (await store.snapshot(sid)).events
    assert [e["type"] for e in logged] == ["tool_started", "stream_delta", "stream_delta", "session_sync"]
    assert logged[0]["args"]["n"] == 2**70 and logged[1]["delta"] == "lone \ud83d half"
    live = await receive_until(comm, "session_sync")  # the two odd ones come from the log's tail
    assert [e["seq"] for e in live] == [e["seq"] for e in logged]
    assert live[2:] == logged[2:]
    await comm.disconnect()
