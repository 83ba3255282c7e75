"""navi_site.http_loop: HTTP handled on a loop of its own, messages crossing in order."""
from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import path

from navi_site.http_loop import HttpLoop, SyncRequests


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


# -- SyncRequests: a sync view handled whole in one worker thread ------------------------------

VIEW_THREADS: list[str] = []


def sync_view(request: HttpRequest) -> HttpResponse:
    VIEW_THREADS.append(threading.current_thread().name)
    response = JsonResponse({"path": request.path, "q": request.GET.get("q")})
    response.set_cookie("seen", "1")
    return response


def streamed_view(request: HttpRequest) -> StreamingHttpResponse:
    return StreamingHttpResponse(b"part%d " % i for i in range(5))


async def async_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse("async")


urlpatterns = [path("sync", sync_view), path("streamed", streamed_view), path("async", async_view)]


def http_scope(route: str, query: bytes = b"") -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": route, "query_string": query, "root_path": "",
            "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 5000), "server": ("testserver", 80)}


@pytest.fixture
def test_urls(settings: Any) -> None:
    settings.ROOT_URLCONF = __name__
    VIEW_THREADS.clear()


async def test_a_sync_view_runs_whole_in_a_worker_thread_and_its_answer_is_sent_on_the_loop(test_urls: None) -> None:
    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        raise AssertionError("a complete request for a sync view must not take the loop path")

    server = Recorder([{"type": "http.request", "body": b""}])
    await HttpLoop(inner, SyncRequests())(http_scope("/sync", b"q=x"), server.receive, server.send)
    assert VIEW_THREADS and VIEW_THREADS[0].startswith("navi-http")
    start, body = server.sent
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"Content-Type"] == b"application/json"
    assert headers[b"X-Request-ID"]  # our middleware ran (the synchronous chain)
    assert headers[b"Set-Cookie"].startswith(b"seen=1")
    assert body == {"type": "http.response.body", "body": b'{"path": "/sync", "q": "x"}'}
    assert server.send_threads == {threading.current_thread().name}


async def test_a_streamed_response_is_sent_part_by_part_in_order(test_urls: None) -> None:
    server = Recorder([{"type": "http.request", "body": b""}])
    await HttpLoop(None, SyncRequests())(http_scope("/streamed"), server.receive, server.send)
    assert [m["type"] for m in server.sent] == ["http.response.start"] + ["http.response.body"] * 6
    assert b"".join(m.get("body", b"") for m in server.sent) == b"part0 part1 part2 part3 part4 "
    assert not server.sent[-1].get("more_body")
    assert server.send_threads == {threading.current_thread().name}


async def test_unknown_paths_get_djangos_404_from_the_thread(test_urls: None) -> None:
    server = Recorder([{"type": "http.request", "body": b""}])
    await HttpLoop(None, SyncRequests())(http_scope("/nowhere"), server.receive, server.send)
    assert server.sent[0]["status"] == 404


async def test_async_views_and_uploads_take_the_loop_path(test_urls: None) -> None:
    sync = SyncRequests()
    assert sync.accepts(http_scope("/sync"), {"type": "http.request", "body": b""})
    assert not sync.accepts(http_scope("/async"), {"type": "http.request", "body": b""})
    assert not sync.accepts(http_scope("/sync"), {"type": "http.request", "body": b"a", "more_body": True})
    assert not sync.accepts(http_scope("/static/app.js"), {"type": "http.request", "body": b""})


@pytest.mark.scaleout
@pytest.mark.django_db(transaction=True)
def test_long_lived_threads_keep_their_postgresql_connection_a_requests_own_thread_does_not(settings: Any) -> None:
    """Django closes a connection at the end of each request under ASGI (CONN_MAX_AGE 0). A thread
    that lives as long as the server (an HTTP worker) keeps its connection across requests; a
    thread made for one request (Django's ASGI handler: asgiref's ThreadSensitiveContext) gets a
    new one and leaves none open behind it."""
    import time

    from asgiref.sync import ThreadSensitiveContext, sync_to_async
    from django.core import signals
    from django.core.handlers.asgi import ASGIHandler
    from django.db import connection

    import navi_site.db_connections  # noqa: F401 - the receiver, as navi_site.asgi installs it

    def request_cycle() -> int:  # what Django does around every request
        signals.request_started.send(sender=ASGIHandler, scope={})
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                return int(cursor.fetchone()[0])
        finally:
            signals.request_finished.send(sender=ASGIHandler)

    async def in_a_request_thread() -> int:
        async with ThreadSensitiveContext():
            return await sync_to_async(request_cycle)()

    def alive(pid: int) -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            return bool(cursor.fetchone()[0])

    def gone(pid: int) -> bool:  # a closed backend leaves pg_stat_activity once it has exited
        deadline = time.monotonic() + 5
        while alive(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    settings.DB_CONNECTION_KEEP_S = 60
    pool = SyncRequests(workers=1)._executor()
    try:
        kept = [pool.submit(request_cycle).result(10) for _ in range(3)]
        own = [asyncio.run(in_a_request_thread()), asyncio.run(in_a_request_thread())]
        assert len(set(kept)) == 1 and alive(kept[0])
        assert own[0] != own[1] and kept[0] not in own
        assert all(gone(pid) for pid in own)  # closed at the request's end, not stranded
    finally:
        pool.submit(lambda: connection.close()).result(10)
        pool.shutdown()
        connection.close()
