"""permessage-deflate on the server's WebSockets (navi_site/wsoptions.py) and the
embedded channel layer's group_send (sessions_app/layers.py)."""
from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

import pytest
from autobahn.websocket.compress import PerMessageDeflate, PerMessageDeflateOffer

from navi_site import wsoptions
from sessions_app.layers import NaviInMemoryChannelLayer


def _offer(header: str) -> PerMessageDeflateOffer:
    params: dict[str, list[str | bool]] = {}
    for part in header.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        params.setdefault(key, []).append(value or True)
    return PerMessageDeflateOffer.parse(params)


def test_chromium_and_websockets_offers_are_accepted_with_a_small_window() -> None:
    for header in ("permessage-deflate; client_max_window_bits",  # Chromium, Firefox
                   "permessage-deflate; server_max_window_bits=12; client_max_window_bits"):
        accept = wsoptions.accept_deflate([_offer(header)])
        assert accept is not None
        pmce = PerMessageDeflate.create_from_offer_accept(True, accept)
        assert pmce.server_max_window_bits <= wsoptions.SERVER_WINDOW_BITS
        assert pmce.mem_level == wsoptions.SERVER_MEM_LEVEL
        assert pmce.server_no_context_takeover is False  # the repeated envelope compresses away
        assert accept.get_extension_string().startswith("permessage-deflate")


def test_compressed_stream_round_trips_through_a_default_decompressor() -> None:
    accept = wsoptions.accept_deflate([_offer("permessage-deflate; client_max_window_bits")])
    server = PerMessageDeflate.create_from_offer_accept(True, accept)
    client = PerMessageDeflate(False, False, False, 15, 15, 8)  # what a browser assumes: 32 KiB window
    wire = 0
    for seq in range(1, 200):
        text = f'{{"type":"stream_delta","delta":"word{seq} ","seq":{seq}}}'.encode()
        server.start_compress_message()
        data = server.compress_message_data(text) + server.end_compress_message()
        wire += len(data)
        client.start_decompress_message()
        assert client.decompress_message_data(data) == text
        client.end_decompress_message()
    assert wire < 200 * 20  # ~45-byte envelopes shrink to a few bytes each


def test_no_offer_means_plain_frames() -> None:
    assert wsoptions.accept_deflate([]) is None


def test_group_send_reaches_every_member_in_order() -> None:
    async def run() -> list[list[int]]:
        layer = NaviInMemoryChannelLayer(capacity=10)
        names = [await layer.new_channel() for _ in range(3)]
        for name in names:
            await layer.group_add("g", name)
        for i in range(5):
            await layer.group_send("g", {"type": "x", "i": i})
        await layer.group_discard("g", names[2])
        await layer.group_send("g", {"type": "x", "i": 5})
        out = []
        for name in names:
            got = []
            while True:
                try:
                    got.append((await asyncio.wait_for(layer.receive(name), 0.05))["i"])
                except TimeoutError:
                    break
            out.append(got)
        return out

    assert asyncio.run(run()) == [[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4]]


def test_an_attached_member_takes_messages_directly_but_never_ahead_of_its_queue() -> None:
    async def run() -> tuple[list[int], list[int], list[int]]:
        layer = NaviInMemoryChannelLayer(capacity=10)
        a, b = await layer.new_channel(), await layer.new_channel()
        for name in (a, b):
            await layer.group_add("g", name)
        taken: list[int] = []
        accepting = True

        def deliver(message: dict[str, Any]) -> bool:
            if accepting:
                taken.append(message["i"])
            return accepting

        layer.attach(a, deliver)
        await layer.group_send("g", {"type": "x", "i": 0})  # taken directly
        accepting = False
        await layer.group_send("g", {"type": "x", "i": 1})  # refused: queued
        accepting = True
        await layer.group_send("g", {"type": "x", "i": 2})  # 1 still queued: queued behind it
        queued = [(await layer.receive(a))["i"], (await layer.receive(a))["i"]]
        await layer.group_send("g", {"type": "x", "i": 3})  # queue empty again: direct
        layer.detach(a)
        await layer.group_send("g", {"type": "x", "i": 4})  # detached: queued
        queued.append((await layer.receive(a))["i"])
        others = [(await layer.receive(b))["i"] for _ in range(5)]  # a plain member gets all, queued
        return taken, queued, others

    taken, queued, others = asyncio.run(run())
    assert taken == [0, 3]
    assert queued == [1, 2, 4]
    assert others == [0, 1, 2, 3, 4]


class _Reactor:
    """Records which descriptors asked to be told when they can write."""

    def __init__(self) -> None:
        self.writers: list[Any] = []

    def addWriter(self, writer: Any) -> None:  # noqa: N802 - Twisted's reactor interface
        self.writers.append(writer)

    def removeWriter(self, writer: Any) -> None:  # noqa: N802
        self.writers.remove(writer)

    def addReader(self, reader: Any) -> None:  # noqa: N802
        pass

    def removeReader(self, reader: Any) -> None:  # noqa: N802
        pass


def test_tcp_writes_go_out_at_once_and_only_the_rest_waits_for_the_loop() -> None:
    from twisted.internet import tcp

    wsoptions.eager_tcp_writes()
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.settimeout(5)
    reactor = _Reactor()
    connection = tcp.Connection(ours, None, reactor)
    connection.connected = 1
    try:
        connection.write(b"frame one")
        assert peer.recv(100) == b"frame one"  # sent by write itself
        assert reactor.writers == []  # no writability round trip through the loop
        big = b"x" * (16 << 20)  # more than the kernel takes at once
        connection.write(big)
        assert reactor.writers == [connection]  # the rest is buffered, the Twisted way
        pending = connection._tempDataLen
        assert 0 < pending < len(big)
        connection.write(b"after")  # behind the buffer, never ahead of it
        assert connection._tempDataLen == pending + len(b"after")
    finally:
        ours.close()
        peer.close()


def test_event_frames_are_compact_json_with_text_as_is() -> None:
    import json

    from sessions_app.consumers import _encode

    for event in ({"type": "stream_delta", "delta": "héllo ✓ \"q\"\n", "seq": 7},
                  {"type": "tool_result", "result": {"n": 1.5, "ok": True, "none": None, "list": [1, "a"]}},
                  {"type": "x", "data": {1: "int keys"}, "big": 2**70}):  # what only json takes
        frame = _encode(event)
        assert frame == json.dumps(event, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.scaleout
def test_redis_pubsub_members_take_group_messages_directly_but_never_ahead_of_their_queue(settings: Any) -> None:
    from sessions_app.layers import NaviRedisPubSubChannelLayer

    async def run() -> tuple[list[int], list[int], list[int]]:
        layer = NaviRedisPubSubChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"])
        try:
            a, b = await layer.new_channel(), await layer.new_channel()
            group = f"g{uuid.uuid4().hex}"
            for name in (a, b):
                await layer.group_add(group, name)
            taken: list[int] = []
            arrived = asyncio.Event()
            accepting = True

            def deliver(message: dict[str, Any]) -> bool:
                if accepting:
                    taken.append(message["i"])
                    arrived.set()
                return accepting

            async def settle() -> None:  # a PUBLISH reaches the subscriber asynchronously
                await asyncio.sleep(0.3)

            layer.attach(a, deliver)
            await layer.group_send(group, {"type": "x", "i": 0})
            await asyncio.wait_for(arrived.wait(), 5)  # taken directly, without a receive
            accepting = False
            await layer.group_send(group, {"type": "x", "i": 1})  # refused: queued
            await settle()
            accepting = True
            await layer.group_send(group, {"type": "x", "i": 2})  # queued behind 1
            await settle()
            queued = [(await layer.receive(a))["i"], (await layer.receive(a))["i"]]
            layer.detach(a)
            await layer.group_send(group, {"type": "x", "i": 3})
            queued.append((await asyncio.wait_for(layer.receive(a), 5))["i"])
            others = [(await asyncio.wait_for(layer.receive(b), 5))["i"] for _ in range(4)]
            return taken, queued, others
        finally:
            await layer.flush()

    taken, queued, others = asyncio.run(run())
    assert taken == [0]
    assert queued == [1, 2, 3]
    assert others == [0, 1, 2, 3]


def test_a_received_message_counts_as_in_hand_until_dispatched_even_while_waiting_for_the_lock() -> None:
    from channels.exceptions import StopConsumer

    from sessions_app.consumers import DispatchState, dispatch_serially

    async def run() -> tuple[list[int], list[int]]:
        state = DispatchState()
        gate = asyncio.Event()
        seen: list[int] = []
        in_hand: list[int] = []
        first: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        second: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        async def dispatch(message: dict[str, Any]) -> None:
            seen.append(message["n"])
            if message["n"] == 1:
                await gate.wait()
            if message["n"] == 2:
                raise StopConsumer

        task = asyncio.ensure_future(dispatch_serially([first.get, second.get], dispatch, state))
        first.put_nowait({"n": 1})
        await asyncio.sleep(0.01)
        second.put_nowait({"n": 2})
        await asyncio.sleep(0.01)
        in_hand.append(state.in_hand)  # one dispatching, one received and waiting for the lock
        gate.set()
        with pytest.raises(StopConsumer):
            await task
        in_hand.append(state.in_hand)
        return seen, in_hand

    assert asyncio.run(run()) == ([1, 2], [2, 0])


def _read_frame(sock: socket.socket, buf: bytearray) -> tuple[int, bytes]:
    """(first byte, payload) of the next server frame (servers never mask)."""
    def need(n: int) -> None:
        while len(buf) < n:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            buf.extend(chunk)

    need(2)
    length, head = buf[1] & 0x7F, 2
    if length == 126:
        need(4)
        length, head = int.from_bytes(buf[2:4], "big"), 4
    elif length == 127:
        need(10)
        length, head = int.from_bytes(buf[2:10], "big"), 10
    need(head + length)
    first, payload = buf[0], bytes(buf[head:head + length])
    del buf[:head + length]
    return first, payload


def test_idle_frames_go_out_plain_until_a_turn_streams_compressed(navi: Any, fake_ollama: Any) -> None:
    """An idle socket's session_sync and heartbeats are sent uncompressed (no compressor is built
    for it); a turn's frames are compressed, and every frame decodes with one inflater
    (context takeover), as a browser would read them."""
    import base64
    import json
    import os
    import zlib

    from tests.transport.test_protocol_live import _session

    sid = _session(navi)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text="A compressed answer. " * 5)
    sock = socket.create_connection(("127.0.0.1", navi.port), timeout=10)
    buf = bytearray()
    try:
        sock.sendall((f"GET /ws/sessions/{sid}?token={navi.token} HTTP/1.1\r\nHost: 127.0.0.1:{navi.port}\r\n"
                      "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                      f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n"
                      "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n").encode())
        while b"\r\n\r\n" not in buf:
            buf.extend(sock.recv(65536))
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        buf[:] = rest
        assert b" 101 " in head.split(b"\r\n")[0] and b"permessage-deflate" in head.lower()
        inflater = zlib.decompressobj(-15)

        def event() -> tuple[bool, dict[str, Any]]:
            first, payload = _read_frame(sock, buf)
            compressed = bool(first & 0x40)  # RSV1
            if compressed:
                payload = inflater.decompress(payload + b"\x00\x00\xff\xff")
            return compressed, json.loads(payload)

        assert event() == (False, {"type": "session_sync"})
        assert event() == (False, {"type": "heartbeat"})  # WS_HEARTBEAT_SECONDS=1.5 here
        frame = json.dumps({"type": "message", "content": "Say something"}).encode()
        mask = os.urandom(4)
        sock.sendall(bytes([0x81, 0x80 | len(frame)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(frame)))
        turn = []
        while not turn or turn[-1][1]["type"] != "session_sync":
            compressed, ev = event()
            if ev["type"] != "heartbeat":
                turn.append((compressed, ev))
    finally:
        sock.close()
    assert all(compressed for compressed, _ in turn), turn
    kinds = [ev["type"] for _, ev in turn]
    assert kinds[0] == "stream_start" and kinds[-2:] == ["stream_end", "session_sync"]
    text = "".join(ev["delta"] for _, ev in turn if ev["type"] == "stream_delta")
    assert text == "A compressed answer. " * 5
