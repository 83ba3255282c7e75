"""navi_site.http_loop: HTTP handled on a loop of its own, messages crossing in order."""
from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from navi_site.http_loop import HttpLoop


class Recorder:
    """The server side of one request, on the test's (the "server's") loop."""

    def __init__(self, incoming: list[dict[str, Any]]) -> None:
        self.incoming = list(incoming)
        self.sent: list[dict[str, Any]] = []
        self.send_threads: set[str] = set()
        self.disconnect = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        if self.incoming:
            return self.incoming.pop(0)
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.send_threads.add(threading.current_thread().name)
        self.sent.append(message)


async def test_request_runs_on_its_own_thread_and_messages_keep_their_order() -> None:
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen["thread"] = threading.current_thread().name
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen["body"] = body
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for i in range(5):
            await send({"type": "http.response.body", "body": b"part%d " % i, "more_body": True})
        await send({"type": "http.response.body", "body": b"end"})

    server = Recorder([{"type": "http.request", "body": b"up", "more_body": True},
                       {"type": "http.request", "body": b"load"}])
    await HttpLoop(app)({"type": "http"}, server.receive, server.send)
    await asyncio.sleep(0.05)  # the last message is handed over without waiting
    assert seen == {"thread": "navi-http-loop", "body": b"upload"}
    assert [m["type"] for m in server.sent] == ["http.response.start"] + ["http.response.body"] * 6
    assert b"".join(m.get("body", b"") for m in server.sent) == b"part0 part1 part2 part3 part4 end"
    assert server.send_threads == {threading.current_thread().name}  # daphne's send runs on daphne's loop


async def test_websockets_stay_on_the_server_loop() -> None:
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(threading.current_thread().name)

    await HttpLoop(app)({"type": "websocket"}, None, None)
    assert seen == [threading.current_thread().name]


async def test_a_client_gone_cancels_the_request() -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    server = Recorder([{"type": "http.request", "body": b""}])
    task = asyncio.ensure_future(HttpLoop(app)({"type": "http"}, server.receive, server.send))
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.get_running_loop().run_in_executor(None, cancelled.wait, 5)
