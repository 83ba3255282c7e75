"""permessage-deflate on the server's WebSockets (navi_site/wsoptions.py) and the
embedded channel layer's group_send (sessions_app/layers.py)."""
from __future__ import annotations

import asyncio

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
