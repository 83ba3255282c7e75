"""Which tabs watch a session (sessions_app.presence): a WebSocket client counts while it is
connected, and says when its page is hidden or shown again (the ``visibility`` frame)."""
from __future__ import annotations

import asyncio

import pytest

from sessions_app import presence
from tests.transport.helpers import connect, make_session, receive_until

live_db = pytest.mark.django_db(transaction=True)


async def _watching(sid: str, expected: presence.Watching) -> None:
    for _ in range(100):  # the consumer handles a frame after it was sent
        if await asyncio.to_thread(presence.watching, sid) == expected:
            return
        await asyncio.sleep(0.02)
    assert await asyncio.to_thread(presence.watching, sid) == expected


@live_db
async def test_tabs_are_counted_with_their_visibility():
    sid, token, _ = await make_session()
    first = await connect(sid, token)
    await receive_until(first, "session_sync")
    second = await connect(sid, token)
    await receive_until(second, "session_sync")
    await _watching(sid, presence.Watching(clients=2, visible=2))
    await second.send_json_to({"type": "visibility", "visible": False})
    await _watching(sid, presence.Watching(clients=2, visible=1))
    await first.disconnect()
    await _watching(sid, presence.Watching(clients=1, visible=0))
    await second.send_json_to({"type": "visibility", "visible": True})
    await _watching(sid, presence.Watching(clients=1, visible=1))
    await second.disconnect()
    await _watching(sid, presence.Watching())


@live_db
async def test_a_bad_visibility_frame_gets_a_clear_error():
    sid, token, _ = await make_session()
    comm = await connect(sid, token)
    await receive_until(comm, "session_sync")
    await comm.send_json_to({"type": "visibility", "visible": "sometimes"})
    error = await receive_until(comm, "error")
    assert error[-1]["message"].startswith("Invalid message: visible: Input should be a valid boolean")
    await _watching(sid, presence.Watching(clients=1, visible=1))
    await comm.disconnect()


def test_an_entry_of_a_dead_process_expires():
    """Scale-out: a server that died without saying goodbye stops counting after TTL_S."""
    import os
    import time

    url = os.environ.get("NAVI_TEST_REDIS")
    if not url:
        pytest.skip("needs Redis (scale-out tier)")
    store = presence.RedisPresence(url)
    store.set("s-expiry", "tab", True)
    assert store.watching("s-expiry") == presence.Watching(clients=1, visible=1)
    assert store.watching("s-expiry", now=time.time() + presence.TTL_S + 1) == presence.Watching()
    store.leave("s-expiry", "tab")
