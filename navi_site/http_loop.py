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
import io
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog
from django.core.handlers.asgi import ASGIHandler as ASGIHandlerBase

log = structlog.get_logger(__name__)

Message = dict[str, Any]


class HttpLoop:
    """ASGI middleware: run the ``http`` scope of ``inner`` on a dedicated event-loop thread."""

    def __init__(self, inner: Any, sync: SyncRequests | None = None) -> None:
        self.inner = inner
        self.sync = sync
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
        if self.sync is not None and self.sync.accepts(scope, first[0]):
            return await self.sync(scope, first[0].get("body", b""), send)

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


def streamed_on_loop(request: Any) -> bool:
    """Whether a streamed response to ``request`` is read on an event loop (Django's ASGI handler: give it an async
    iterator, so that each part is made off the loop) or in the request's own thread (``SyncRequests``, or WSGI: give
    it a sync one, which that thread reads part by part; an async one it could only read to its end first)."""
    from django.core.handlers.asgi import ASGIRequest

    return isinstance(request, ASGIRequest) and not getattr(request, "navi_in_thread", False)


def _log_failure(handed: Any) -> None:
    if not handed.cancelled() and handed.exception() is not None:
        log.warning("http_send_failed", error=repr(handed.exception()))


class SyncRequests:
    """Requests whose view is synchronous, handled whole in one worker thread.

    Django's ASGI handler runs a sync view through ``sync_to_async``, and the request-started
    signal, the view and the response's close each cross from the event loop to Django's one
    sync thread and back: with daphne's loop busy streaming, every crossing waits for the GIL
    behind it. Here the request is handed to a thread once, and Django's synchronous handler
    (the WSGI path: same middleware, signals and error pages) runs it there, like a WSGI
    server would. The response comes back in one crossing; a streamed response (a file
    download) is sent part by part, each part waiting for daphne to take it.

    Django's handler gave every request a thread of its own; ``workers`` threads (started as
    needed) keep a few slow views (a login's password hash, a recall call waiting on the
    server's loop) from holding up the rest. Only complete requests (the body arrived in one
    message) with a synchronous view come here; uploads, async views (a turn started by ``POST /messages``) and static files take
    the event-loop path.
    """

    def __init__(self, workers: int = 16) -> None:
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._handler: Any = None
        self._lock = threading.Lock()

    def accepts(self, scope: dict[str, Any], first: Message) -> bool:
        from asgiref.sync import iscoroutinefunction
        from django.conf import settings
        from django.urls import Resolver404, resolve

        if first.get("type") != "http.request" or first.get("more_body"):
            return False
        path = scope.get("path", "")
        static = settings.STATIC_URL or ""
        if static.startswith("/") and path.startswith(static):
            return False
        try:
            match = resolve(path)
        except Resolver404:
            return True  # Django's 404, sync
        return not iscoroutinefunction(match.func)

    async def __call__(self, scope: dict[str, Any], body: bytes, send: Any) -> None:
        loop = asyncio.get_running_loop()

        def send_from_thread(message: Message) -> None:
            asyncio.run_coroutine_threadsafe(send(message), loop).result()

        messages = await loop.run_in_executor(self._executor(), self._handle, scope, body, send_from_thread)
        for message in messages:
            await send(message)

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="navi-http")
                self._handler = _SyncHandler()
            return self._pool

    def _handle(self, scope: dict[str, Any], body: bytes, send: Any) -> list[Message]:
        from django.core import signals
        from django.core.handlers.asgi import ASGIHandler, get_script_prefix
        from django.urls import set_script_prefix

        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=ASGIHandler, scope=scope)
        body_file = io.BytesIO(body)
        response: Any = None
        try:
            request, response = self._handler.create_request(scope, body_file)
            if request is not None:
                request.navi_in_thread = True  # its streamed response is read here (streamed_on_loop)
                response = self._handler.get_response(request)
            start = {"type": "http.response.start", "status": response.status_code,
                     "headers": _headers(response)}
            if not response.streaming:
                return [start, {"type": "http.response.body", "body": response.content}]
            send(start)
            for part in response:
                send({"type": "http.response.body", "body": part, "more_body": True})
            send({"type": "http.response.body"})
            return []
        finally:
            body_file.close()
            if response is not None:
                response.close()  # request_finished: the thread's database connection is tidied
            else:
                signals.request_finished.send(sender=ASGIHandler)


class _SyncHandler(ASGIHandlerBase):
    """Django's ASGI request parsing with the synchronous middleware chain."""

    def __init__(self) -> None:  # not ASGIHandler's: that loads the async chain
        self.load_middleware(is_async=False)


def _headers(response: Any) -> list[tuple[bytes, bytes]]:
    """The response's headers and cookies as ASGI wants them (as Django's ASGI handler sends them)."""
    out = [(k.encode("ascii") if isinstance(k, str) else bytes(k), v.encode("latin1") if isinstance(v, str) else bytes(v))
           for k, v in response.items()]
    out += [(b"Set-Cookie", c.output(header="").encode("ascii").strip()) for c in response.cookies.values()]
    return out
