"""HTTP requests handled on an event loop of their own, in their own thread.

Daphne serves HTTP and WebSockets from one event loop. With many sessions streaming, that loop
carries thousands of ready callbacks a second, and a REST request crosses it about eight
times (daphne, Django's ASGI handler, the request signals, the view's thread, the response),
each time queued behind a whole loop iteration: ``GET /sessions`` took ~130 ms at the median
while its view ran 10 ms. Here daphne's loop only receives the request and writes the response;
Django handles it on a second loop, which is idle most of the time. The two threads share the
interpreter by the GIL's time slices, so a request waits milliseconds for its turn instead of
queueing behind the streams. WebSockets stay on daphne's loop.

Messages cross between the loops in order: ``send`` hands each message to daphne's loop as a
task (tasks start in the order they were scheduled, and daphne's ``send`` writes to the socket
at once). A body streamed in several parts waits for each part to be handed over, so a large
download keeps the client's pace instead of piling up in memory. ``receive`` returns the
request's first message, which daphne already holds, without a crossing; any further part of
an upload and the disconnect are fetched from daphne's loop when asked for.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any

import structlog

log = structlog.get_logger(__name__)

Message = dict[str, Any]


class HttpLoop:
    """ASGI middleware: run the ``http`` scope of ``inner`` on a dedicated event-loop thread."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                started = threading.Event()
                threading.Thread(target=_serve, args=(loop, started), name="navi-http-loop", daemon=True).start()
                started.wait()
                self._loop = loop
            return self._loop

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "http":
            return await self.inner(scope, receive, send)
        server = asyncio.get_running_loop()
        first: list[Message] = [await receive()]

        async def bridged_receive() -> Message:
            if first:
                return first.pop()
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(receive(), server))

        async def bridged_send(message: Message) -> None:
            handed = asyncio.run_coroutine_threadsafe(send(message), server)
            if message.get("more_body"):  # a streamed body: keep the client's pace
                await asyncio.wrap_future(handed)
            else:
                handed.add_done_callback(_log_failure)

        done = asyncio.run_coroutine_threadsafe(self.inner(scope, bridged_receive, bridged_send), self.loop())
        await asyncio.wrap_future(done)  # cancelling this (client gone) cancels the request's task


def _serve(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(started.set)
    loop.run_forever()


def _log_failure(handed: Any) -> None:
    if not handed.cancelled() and handed.exception() is not None:
        log.warning("http_send_failed", error=repr(handed.exception()))
