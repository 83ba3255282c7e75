"""Plumbing shared by the HTTP backends (Ollama, OpenAI-compatible).

The test network guard, the mapping of transport failures to errors a person
can act on, bounded reading of error bodies, line splitting of streamed bodies
and tool-call argument parsing.
"""
from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import os
import ssl
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse

import aiohttp
import httpx
import orjson
import structlog
from httpx_aiohttp import AiohttpTransport, HttpxAiohttpClient

from agent.llm.base import BackendUnreachable, LLMError, StreamTimeout


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context for every LLM client. httpx builds a new one per ``AsyncClient``
    (loading certifi's CA bundle: ~10-20 ms of CPU on the event loop), and every LLM call
    opens a client, so 100 turns starting together stalled every stream for seconds.
    Same verification as httpx's default (honours SSL_CERT_FILE / SSL_CERT_DIR)."""
    return httpx.create_ssl_context()

log = structlog.get_logger(__name__)


def llm_client(timeout: httpx.Timeout) -> httpx.AsyncClient:
    """An httpx client for the model servers, on aiohttp's HTTP/1.1 (httpx-aiohttp).

    A model streams one small NDJSON/SSE chunk per token; through httpcore each chunk cost
    h11's pure-Python parsing plus anyio's pause/resume of the socket, ~40 % of the server's
    event loop with 100 sessions streaming. aiohttp parses in C (llhttp) and keeps reading.
    The httpx API (requests, streamed responses, env proxies, errors) stays the same: the
    errors are re-mapped from aiohttp's own (``_httpx_error``) so that "cannot connect"
    and "broke off mid-answer" keep meaning what they say."""
    return _Client(timeout=timeout, verify=shared_ssl_context())


class _Transport(AiohttpTransport):
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await super().handle_async_request(request)
        except (TimeoutError, httpx.TransportError, aiohttp.ClientError) as exc:
            raise _httpx_error(exc, request) from exc
        return httpx.Response(status_code=response.status_code, headers=response.headers, request=request,
                              stream=_Body(response.stream, request), extensions=response.extensions)


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: Any, request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    def raw_content(self) -> aiohttp.StreamReader | None:
        """aiohttp's buffer of the body (``response_lines`` reads it directly)."""
        response = getattr(self._stream, "_aiohttp_response", None)
        return response.content if isinstance(response, aiohttp.ClientResponse) else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except (TimeoutError, httpx.TransportError, aiohttp.ClientError) as exc:
            raise _httpx_error(exc, self._request, reading=True) from exc

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        except (TimeoutError, httpx.TransportError, aiohttp.ClientError):
            pass  # closing a broken connection: nothing left to tell


def _httpx_error(exc: BaseException, request: httpx.Request, *, reading: bool = False) -> httpx.TransportError:
    """httpx's exception for what aiohttp raised (httpx-aiohttp maps a refused connection to a
    connect *timeout*, and any dropped connection too)."""
    cause = exc.__cause__ if isinstance(exc, httpx.TransportError) and exc.__cause__ is not None else exc
    text = str(cause).strip() or type(cause).__name__
    kind: type[httpx.TransportError]
    if isinstance(cause, aiohttp.ConnectionTimeoutError):
        kind = httpx.ConnectTimeout
    elif isinstance(cause, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        kind = httpx.ReadTimeout if reading or isinstance(cause, aiohttp.SocketTimeoutError) else httpx.PoolTimeout
    elif isinstance(cause, aiohttp.ClientConnectorError):
        kind = httpx.ConnectError
    elif isinstance(cause, aiohttp.ClientHttpProxyError):
        kind = httpx.ProxyError
    elif isinstance(cause, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        kind = httpx.UnsupportedProtocol
    elif isinstance(cause, aiohttp.ServerDisconnectedError | aiohttp.ClientResponseError | aiohttp.ClientPayloadError):
        kind = httpx.RemoteProtocolError
    elif isinstance(cause, httpx.TransportError):
        return cause
    else:
        kind = httpx.ReadError
    return kind(text, request=request)


class _Client(HttpxAiohttpClient):
    """HttpxAiohttpClient with our transport (its own and its env proxies' mounts)."""

    def _init_transport(self, *args: Any, transport: httpx.AsyncBaseTransport | None = None,  # type: ignore[override]
                        **kwargs: Any) -> httpx.AsyncBaseTransport:
        return transport or _Transport(*args, **kwargs)

    def _init_proxy_transport(self, proxy: httpx.Proxy, **kwargs: Any) -> httpx.AsyncBaseTransport:  # type: ignore[override]
        return _Transport(proxy=proxy, **kwargs)


NETWORK_GUARD_ENV = "NAVI_TEST_NETWORK_GUARD"
MAX_ERROR_BODY = 64 * 1024
MAX_LINE = 8 * 1024 * 1024  # one NDJSON/SSE line; a base64 image echo is the biggest we expect
MAX_BODY = 32 * 1024 * 1024  # a whole non-streamed answer


def check_network_guard(url: str, *, setting: str) -> None:
    """Refuse non-loopback hosts while the test suite's guard is on.

    Raises BackendUnreachable. Host names other than ``localhost`` are refused
    without resolving them: a test must never depend on DNS.
    """
    if os.environ.get(NETWORK_GUARD_ENV) != "1":
        return
    host = (urlparse(url).hostname or "").strip("[]").lower()
    if host == "localhost" or _is_loopback_ip(host):
        return
    raise BackendUnreachable(
        f"refusing to connect to {url}: {NETWORK_GUARD_ENV}=1 (test run) allows only loopback hosts; "
        f"point {setting} at the fake server (127.0.0.1)"
    )


def _is_loopback_ip(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def timeout(connect: float, read: float) -> httpx.Timeout:
    """Explicit timeouts: ``read`` is only a backstop, the stream guard enforces the real limits."""
    return httpx.Timeout(connect=connect, read=read, write=connect * 2, pool=connect)


def request_timeout(base: httpx.Timeout, body: dict[str, Any]) -> httpx.Timeout:
    """The timeouts of one chat request: a streamed one has no read timeout.

    A streamed answer is only ever read under the stream guard (agent/stream_guard.py), whose
    first-chunk and between-chunk limits (LLM_STREAM_*_TIMEOUT) cover the wait for the
    headers and for every line. aiohttp re-arms its read timer for every chunk it receives (a
    timer created and one cancelled per token: ~4 % of the server's loop with 100 sessions
    streaming), and its 900 s backstop would cut a stream the user allowed a longer silence."""
    if body.get("stream"):
        return httpx.Timeout(connect=base.connect, read=None, write=base.write, pool=base.pool)
    return base


def transport_error(exc: httpx.HTTPError, *, url: str, server: str, setting: str) -> LLMError:
    """Turn an httpx failure into a message naming the URL and what to check."""
    if isinstance(exc, httpx.ConnectTimeout):
        return BackendUnreachable(
            f"timed out connecting to the {server} at {url} — is it running and reachable? Check {setting}"
        )
    if isinstance(exc, httpx.ConnectError):
        return BackendUnreachable(
            f"cannot connect to the {server} at {url} ({_reason(exc)}) — is it running? Check {setting}"
        )
    if isinstance(exc, httpx.UnsupportedProtocol):
        return BackendUnreachable(f"the {server} address {url} is not an http:// or https:// URL — check {setting}")
    if isinstance(exc, httpx.TimeoutException):
        return StreamTimeout(f"the {server} at {url} stopped answering ({type(exc).__name__}); the request was cancelled")
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return LLMError(
            f"the connection to the {server} at {url} broke off in the middle of the answer ({_reason(exc)}); "
            "the server may have crashed or run out of memory — check its logs"
        )
    return LLMError(f"request to the {server} at {url} failed: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__


async def read_error_body(response: httpx.Response) -> str:
    """The server's error text (``{"error": ...}`` or plain text), at most MAX_ERROR_BODY bytes."""
    data = bytearray()
    try:
        async for piece in response.aiter_bytes():
            data += piece
            if len(data) >= MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        pass
    return error_text(bytes(data[:MAX_ERROR_BODY]))


def error_text(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return text[:500]
    return _error_from_payload(payload) or text[:500]


def _error_from_payload(payload: Any) -> str:
    if not isinstance(payload, dict):
        return ""
    err = payload.get("error", payload.get("detail"))
    if isinstance(err, dict):
        err = err.get("message") or json.dumps(err)
    return str(err) if err is not None else ""


async def read_body(response: httpx.Response) -> bytes:
    """A whole response body, refusing more than MAX_BODY bytes."""
    data = bytearray()
    async for piece in response.aiter_bytes():
        data += piece
        if len(data) > MAX_BODY:
            raise LLMError(f"the answer from {response.request.url} is larger than {MAX_BODY // 2**20} MB; refused")
    return bytes(data)


def aiohttp_buffer(response: httpx.Response) -> aiohttp.StreamReader | None:
    """aiohttp's buffer of an uncompressed body from ``llm_client``, else None."""
    stream = getattr(response.stream, "_stream", None)  # httpx wraps the transport's stream
    if not isinstance(stream, _Body):
        return None
    if response.headers.get("content-encoding", "identity").strip().lower() != "identity":
        return None  # httpx decodes it
    return stream.raw_content()


async def response_lines(response: httpx.Response) -> AsyncIterator[str]:
    """The lines of a streamed response body (``iter_lines`` of its bytes).

    A model sends one small line per token. Through httpx each piece passed five generators
    (aiohttp's chunk iterator, httpx-aiohttp's stream, httpx's raw and decoded streams, ours)
    before ``iter_lines``: with 100 sessions streaming that was ~7 % of the server's loop.
    An uncompressed body is read straight from aiohttp's buffer instead; a compressed one
    (httpx decodes it) takes the httpx path."""
    raw = aiohttp_buffer(response)
    if raw is None:
        async for text in iter_lines(response.aiter_bytes()):
            yield text
        return
    buffer = bytearray()
    try:
        while piece := await raw.readany():
            for line in _take_lines(buffer, piece):
                yield line
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise _httpx_error(exc, response.request, reading=True) from exc
    for line in _last_line(buffer):
        yield line


def loads_line(text: str) -> Any:
    """One streamed JSON line (a token's NDJSON line or SSE payload): orjson (~6x faster than
    json for these small objects, one per token); json where orjson differs. orjson refuses a
    lone surrogate escape (a model cut mid-emoji): json takes it. orjson turns an integer
    beyond 64 bits into a float: the only numbers a model chooses are a tool call's arguments
    (Ollama sends them as JSON; OpenAI-compatible servers as a string, parsed later by json),
    so a line with tool calls is parsed by json, exactly. Raises ValueError when not JSON."""
    if "tool_calls" not in text:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


async def iter_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """Complete lines of a byte stream, whatever the read boundaries; a last unterminated line too."""
    buffer = bytearray()
    async for piece in chunks:
        for line in _take_lines(buffer, piece):
            yield line
    for line in _last_line(buffer):
        yield line


def _take_lines(buffer: bytearray, piece: bytes) -> list[str]:
    """Add ``piece`` to ``buffer`` and take out the complete lines (refusing an endless one)."""
    if not buffer and piece and piece.find(b"\n") == len(piece) - 1:  # one whole line: the usual piece
        return [piece[:-1].rstrip(b"\r").decode("utf-8", "replace")]
    buffer += piece
    lines = []
    while (cut := buffer.find(b"\n")) >= 0:
        lines.append(bytes(buffer[:cut]).rstrip(b"\r").decode("utf-8", "replace"))
        del buffer[: cut + 1]
    if len(buffer) > MAX_LINE:
        raise LLMError(f"the model server sent a line longer than {MAX_LINE // 2**20} MB; refused")
    return lines


def _last_line(buffer: bytearray) -> list[str]:
    """What is left at the end of the stream: a last line without its newline, if any."""
    return [bytes(buffer).rstrip(b"\r").decode("utf-8", "replace")] if buffer.strip() else []


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict (a JSON object), else an empty dict."""
    return value if isinstance(value, dict) else {}


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def cap_tokens(backend: int, request: int | None) -> int:
    """The output cap of one request: the lower of the backend's (0: none) and the request's own (None: none)."""
    caps = [c for c in (backend, request or 0) if c > 0]
    return min(caps) if caps else 0


def parse_arguments(name: str, raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool arguments as a dict, or ``({}, why)`` when they are not a JSON object."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            return {}, f"the arguments for tool '{name}' are not valid JSON ({exc.msg} at char {exc.pos}): {raw[:200]!r}"
        except RecursionError:
            return {}, f"the arguments for tool '{name}' are nested too deep to read: {raw[:200]!r}"
        if isinstance(value, dict):
            return value, None
        raw = value
    return {}, f"the arguments for tool '{name}' must be a JSON object, got {type(raw).__name__}: {str(raw)[:200]!r}"


def mentions_unsupported(error: str, feature: str) -> bool:
    """Whether a 400 error says the model cannot do ``feature`` ("tools" / "thinking")."""
    text = error.lower()
    return f"does not support {feature}" in text or f"doesn't support {feature}" in text or (
        feature == "thinking" and "does not support think" in text
    )
