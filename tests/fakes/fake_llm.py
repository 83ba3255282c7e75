"""A scriptable fake Ollama (and OpenAI-compatible) server on a real loopback socket.

It runs in a background thread with its own event loop, speaks just enough
HTTP/1.1 (one request per connection, ``Connection: close``, chunked streaming
with a flush per chunk) and can hang, stall, drop connections and send broken
lines. Endpoints: ``/api/chat`` (NDJSON, or one JSON object for
``stream: false``), ``/api/show``, ``/api/tags``, ``/api/version``, ``/api/pull`` (scriptable
NDJSON progress and errors, see ``script_pull``), ``/v1/chat/completions`` (SSE) and ``/v1/models``.

    fake.script(thinking="hm", text="Hi!", eval_count=3)
    backend = OllamaBackend(fake.url)
    ...
    assert fake.last_chat["json"]["model"] == "m"
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from tests.fakes import wire
from tests.fakes.wire import Reply

DEFAULT_CAPABILITIES = ("completion", "tools", "thinking")
HEAD_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PullScript:
    """How ``/api/pull`` answers for one model (Ollama's NDJSON lines).

    ``layers``: (digest, bytes) per layer, reported in ``steps`` increments each, ``delay`` seconds apart;
    ``error`` ends the stream with ``{"error": …}`` after ``error_after`` progress lines (HTTP 200, as
    Ollama does once streaming started); ``http_status`` != 200 refuses the request outright.
    On success the model joins ``known_models`` (when that is a set) with the total size."""

    layers: tuple[tuple[str, int], ...] = (("sha256:" + "a" * 64, 2_000_000_000), ("sha256:" + "b" * 64, 12_000))
    steps: int = 4
    delay: float = 0.0
    error: str | None = None
    error_after: int = 0
    http_status: int = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    json: Any

    def __getitem__(self, key: str) -> Any:  # fake.requests[0]["json"] reads naturally in asserts
        return getattr(self, key)


class FakeLLMServer:
    """See the module docstring. Thread-safe enough for tests: the server thread only appends and counts."""

    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="fake-llm-server", daemon=True)
        self._ready = threading.Event()
        self._server: asyncio.base_events.Server | None = None
        self._generation = 0
        self.reset()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake LLM server did not start")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    @property
    def url(self) -> str:
        """Base URL for OLLAMA_HOST."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """Base URL for OPENAI_BASE_URL."""
        return f"{self.url}/v1"

    # -- scripting -------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget scripts, recorded requests, counters and per-model settings."""
        self._generation += 1
        self.replies: deque[Reply] = deque()
        self.default_reply = Reply(text=wire.DEFAULT_TEXT)
        self.requests: list[RecordedRequest] = []
        self.capabilities: dict[str, list[str]] = {}
        self.default_capabilities: list[str] = list(DEFAULT_CAPABILITIES)
        self.known_models: set[str] | None = None  # None: every model exists
        # Schema-constrained output the server takes: OpenAI ``response_format`` forms ("json_schema",
        # "json_object" with a schema, as llama-cpp-python), and Ollama's ``format`` as a schema (0.5+).
        self.schema_forms: set[str] = {"json_schema", "json_object"}
        self.ollama_schema_format = True
        self.open_streams = 0
        self.closed_by_client = 0
        self.completed_streams = 0
        self.dropped_by_server = 0
        # /api/tags details per model (size in bytes, parameter_size, quantization_level, family).
        self.model_details: dict[str, dict[str, Any]] = {}
        self.pull_scripts: dict[str, PullScript] = {}
        self.pulls_cancelled = 0  # the client closed the connection mid-pull
        self.pulls_finished = 0

    def script(self, **fields: Any) -> Reply:
        """Queue one reply (FIFO); fields as in ``tests.fakes.wire.Reply``."""
        if "tool_calls" in fields:
            fields["tool_calls"] = tuple(fields["tool_calls"])
        if "raw_lines" in fields and fields["raw_lines"] is not None:
            fields["raw_lines"] = tuple(fields["raw_lines"])
        reply = Reply(**fields)
        self.replies.append(reply)
        return reply

    def decide(self, tool: str | None = None, **arguments: Any) -> Reply:
        """Queue a constrained decision (agent.decide): ``{"action": "answer"}`` without ``tool``,
        else a call of ``tool`` with ``arguments``."""
        decision: dict[str, Any] = {"action": "answer"} if tool is None else {
            "action": "call", "tool": tool, "arguments": arguments}
        return self.script(text=json.dumps(decision))

    def schema_of(self, request: RecordedRequest) -> dict[str, Any] | None:
        """The JSON schema a chat request asked the output to follow (Ollama ``format`` or OpenAI
        ``response_format`` in either form), else None."""
        body = request.json if isinstance(request.json, dict) else {}
        if isinstance(body.get("format"), dict):
            return body["format"]
        rf = body.get("response_format")
        if isinstance(rf, dict) and rf.get("type") == "json_schema":
            return (rf.get("json_schema") or {}).get("schema")
        if isinstance(rf, dict) and isinstance(rf.get("schema"), dict):
            return rf["schema"]
        return None

    def add_model(self, name: str, *, size: int = 1, parameter_size: str = "", quantization: str = "",
                  family: str = "fake", capabilities: list[str] | None = None) -> None:
        """Make ``name`` a pulled model (``known_models`` becomes a set if it was None)."""
        if self.known_models is None:
            self.known_models = set()
        self.known_models.add(name)
        self.model_details[name] = {"size": size, "parameter_size": parameter_size,
                                    "quantization_level": quantization, "family": family}
        if capabilities is not None:
            self.set_capabilities(name, capabilities)

    def script_pull(self, model: str, **fields: Any) -> PullScript:
        """How ``/api/pull`` answers for ``model``; an unscripted model is "file does not exist", like Ollama."""
        if "layers" in fields:
            fields["layers"] = tuple(tuple(layer) for layer in fields["layers"])
        script = self.pull_scripts[model] = PullScript(**fields)
        return script

    def set_capabilities(self, model: str, capabilities: list[str]) -> None:
        """What ``/api/show`` reports for ``model``; the chat endpoint then rejects tools/think like Ollama."""
        self.capabilities[model] = list(capabilities)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path in ("/api/chat", "/v1/chat/completions")]

    @property
    def last_chat(self) -> RecordedRequest:
        return self.chat_requests[-1]

    async def wait_for(self, predicate: Callable[[FakeLLMServer], bool], within: float = 2.0) -> bool:
        """Poll ``predicate(self)`` from async test code until it holds or ``within`` seconds pass."""
        deadline = time.monotonic() + within
        while not predicate(self):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def wait_for_sync(self, predicate: Callable[[FakeLLMServer], bool], within: float = 2.0) -> bool:
        deadline = time.monotonic() + within
        while not predicate(self):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    # -- HTTP ------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        generation = self._generation
        try:
            parsed = await asyncio.wait_for(_read_request(reader), HEAD_TIMEOUT)
            if parsed is not None:
                await self._route(parsed, reader, writer, generation)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    async def _route(
        self, request: RecordedRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, generation: int
    ) -> None:
        if generation == self._generation:
            self.requests.append(request)
        body = request.json if isinstance(request.json, dict) else {}
        if request.path == "/api/version":
            await _send_json(writer, 200, {"version": "0.12.0-fake"})
        elif request.path in ("/api/tags", "/v1/models"):
            await _send_json(writer, 200, self._model_list(request.path))
        elif request.path == "/api/show":
            await self._show(writer, body)
        elif request.path == "/api/pull":
            await self._pull(body, reader, writer, generation)
        elif request.path in ("/api/chat", "/v1/chat/completions"):
            await self._chat(request.path == "/api/chat", body, reader, writer, generation)
        else:
            await _send(writer, 404, b"404 page not found", "text/plain")

    def _model_list(self, path: str) -> dict[str, Any]:
        names = sorted(self.known_models or {"fake-model"})
        if path == "/v1/models":
            return {"object": "list", "data": [{"id": n, "object": "model", "created": 1700000000,
                                                "owned_by": "fake"} for n in names]}
        return {"models": [self._tag(n) for n in names]}

    def _tag(self, name: str) -> dict[str, Any]:
        d = self.model_details.get(name, {})
        return {"name": name, "model": name, "modified_at": "2026-01-02T03:04:05.000000Z", "size": d.get("size", 1),
                # Another build of a model (other size or capabilities) has another digest, as in Ollama.
                "digest": hashlib.sha256(repr((name, d.get("size", 1), self.capabilities.get(name))).encode()).hexdigest(),
                "details": {"parent_model": "", "format": "gguf", "family": d.get("family", "fake"),
                            "families": [d.get("family", "fake")], "parameter_size": d.get("parameter_size", ""),
                            "quantization_level": d.get("quantization_level", "")}}

    def _missing(self, model: str) -> bool:
        return self.known_models is not None and model not in self.known_models

    async def _show(self, writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        model = str(body.get("model") or body.get("name") or "")
        if self._missing(model):
            await _send_json(writer, 404, {"error": f"model '{model}' not found"})
            return
        caps = self.capabilities.get(model, self.default_capabilities)
        await _send_json(writer, 200, {"capabilities": caps, "details": self._tag(model)["details"], "modelfile": "",
                                       "model_info": {"general.architecture": "fake"}})

    async def _pull(self, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    generation: int) -> None:
        model = str(body.get("model") or body.get("name") or "")
        script = self.pull_scripts.get(model)
        if script is None:
            script = PullScript(layers=(), error="pull model manifest: file does not exist")
        if script.http_status != 200:
            await _send_json(writer, script.http_status, {"error": script.error or HTTPStatus(script.http_status).phrase})
            return
        lines: list[dict[str, Any]] = [{"status": "pulling manifest"}]
        for digest, total in script.layers:
            lines.append({"status": f"pulling {digest[7:19]}", "digest": digest, "total": total})
            for step in range(1, script.steps + 1):
                lines.append({"status": f"pulling {digest[7:19]}", "digest": digest, "total": total,
                              "completed": total * step // script.steps})
        if script.error is not None:
            lines = [*lines[: 1 + script.error_after], {"error": script.error}]
        else:
            lines += [{"status": "verifying sha256 digest"}, {"status": "writing manifest"}, {"status": "success"}]
        watcher = asyncio.ensure_future(reader.read(1))
        try:
            writer.write(_head(200, "application/x-ndjson", chunked=True))
            await writer.drain()
            for n, line in enumerate(lines):
                if n and script.delay and await _gone(watcher, script.delay):
                    self._count(generation, "pulls_cancelled", 1)
                    return
                piece = json.dumps(line).encode() + b"\n"
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            self._count(generation, "pulls_cancelled", 1)
            return
        finally:
            watcher.cancel()
        self._count(generation, "pulls_finished", 1)
        if script.error is None and generation == self._generation:
            if self.known_models is not None:
                self.known_models.add(model)
            self.model_details.setdefault(model, {"size": sum(t for _, t in script.layers)})

    def _rejection(self, model: str, body: dict[str, Any], ollama: bool) -> str | None:
        caps = self.capabilities.get(model, self.default_capabilities)
        if body.get("tools") and "tools" not in caps:
            return f"registry.ollama.ai/library/{model} does not support tools"
        if ollama and body.get("think") and "thinking" not in caps:
            return f'"{model}" does not support thinking'
        return None

    def _schema_refusal(self, body: dict[str, Any], ollama: bool) -> tuple[int, str] | None:
        """How this server refuses a schema it does not take (as the real ones do), else None."""
        if ollama:
            if isinstance(body.get("format"), dict) and not self.ollama_schema_format:
                return 400, "invalid format: json: cannot unmarshal object into Go value of type string"
            return None
        rf = body.get("response_format")
        if not isinstance(rf, dict):
            return None
        form = "json_schema" if rf.get("type") == "json_schema" else "json_object" if "schema" in rf else None
        if form is not None and form not in self.schema_forms:
            return 500, "Internal Server Error"
        return None

    async def _chat(
        self, ollama: bool, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        generation: int,
    ) -> None:
        model = str(body.get("model") or "")
        if self._missing(model):
            await self._error(writer, ollama, 404, f"model '{model}' not found")
            return
        if (rejection := self._rejection(model, body, ollama)) is not None:
            await self._error(writer, ollama, 400, rejection)
            return
        if (refusal := self._schema_refusal(body, ollama)) is not None:
            await self._error(writer, ollama, *refusal)
            return
        reply = self.replies.popleft() if self.replies else self.default_reply
        if reply.http_status != 200:
            await self._error(writer, ollama, reply.http_status, reply.error or HTTPStatus(reply.http_status).phrase)
            return
        if not body.get("stream", ollama):  # Ollama streams unless told not to; OpenAI the opposite
            if reply.hang_before_first_chunk:
                await asyncio.sleep(reply.hang_before_first_chunk)
            payload = wire.ollama_body(reply, model) if ollama else wire.openai_body(reply, model)
            await _send_json(writer, 200, payload)
            return
        if ollama:
            chunks, content_type = wire.ollama_stream(reply, model), "application/x-ndjson"
        else:
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks, content_type = wire.openai_stream(reply, model, usage), "text/event-stream"
        await self._stream(reader, writer, chunks, reply, content_type, generation)

    async def _error(self, writer: asyncio.StreamWriter, ollama: bool, status: int, message: str) -> None:
        await _send_json(writer, status, {"error": message} if ollama else wire.openai_error(message, status))

    async def _stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, chunks: list[bytes], reply: Reply,
        content_type: str, generation: int,
    ) -> None:
        watcher = asyncio.ensure_future(reader.read(1))  # completes (b"") when the client closes
        self._count(generation, "open_streams", 1)
        outcome = "closed_by_client"
        try:
            writer.write(_head(200, content_type, chunked=True))
            await writer.drain()
            outcome = await self._play(writer, watcher, chunks, reply)
        except ConnectionError:
            outcome = "closed_by_client"
        finally:
            watcher.cancel()
            self._count(generation, "open_streams", -1)
            self._count(generation, outcome, 1)

    async def _play(
        self, writer: asyncio.StreamWriter, watcher: asyncio.Future[bytes], chunks: list[bytes], reply: Reply
    ) -> str:
        if reply.hang_before_first_chunk and await _gone(watcher, reply.hang_before_first_chunk):
            return "closed_by_client"
        for n, piece in enumerate(chunks):
            if reply.drop_after_chunks is not None and n >= reply.drop_after_chunks:
                writer.transport.abort()
                return "dropped_by_server"
            pause = reply.stall_seconds if reply.stall_after_chunks == n else reply.delay_between_chunks if n else 0
            if (pause and await _gone(watcher, pause)) or watcher.done():
                return "closed_by_client"
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return "completed_streams"

    def _count(self, generation: int, name: str, delta: int) -> None:
        if generation == self._generation:  # a stream of an earlier test must not disturb this one
            setattr(self, name, getattr(self, name) + delta)


async def _gone(watcher: asyncio.Future[bytes], seconds: float) -> bool:
    done, _ = await asyncio.wait({watcher}, timeout=seconds)
    return bool(done)


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
    length = int(headers.get("content-length", "0") or 0)
    raw = await reader.readexactly(length) if length else b""
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = raw.decode("utf-8", "replace")
    return RecordedRequest(method=method, path=target.split("?", 1)[0], headers=headers, json=payload)


def _head(status: int, content_type: str, *, chunked: bool = False, length: int = 0) -> bytes:
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    return (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: {content_type}\r\n"
        f"{framing}\r\nConnection: close\r\n\r\n"
    ).encode()


async def _send(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str) -> None:
    writer.write(_head(status, content_type, length=len(body)) + body)
    await writer.drain()


async def _send_json(writer: asyncio.StreamWriter, status: int, payload: Any) -> None:
    await _send(writer, status, json.dumps(payload).encode(), "application/json; charset=utf-8")


_SERVER: FakeLLMServer | None = None
_SERVER_LOCK = threading.Lock()


def shared_server() -> FakeLLMServer:
    """The process-wide server, started on first use (it is a daemon thread: no teardown needed)."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None:
            _SERVER = FakeLLMServer().start()
        return _SERVER
