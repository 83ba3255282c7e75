"""The Ollama backend: ``/api/chat`` over httpx, NDJSON streaming, capability detection.

Wire format (Ollama ≥ 0.9): each streamed line is a JSON object with
``message.thinking`` / ``message.content`` / ``message.tool_calls`` deltas; the
last line has ``done: true``, ``done_reason`` and the token counts.

Capabilities come from ``/api/show`` (``capabilities: ["completion", "tools",
"thinking", "vision"]``), cached per model on the backend (one backend per
host, see ``agent.llm.registry``). A model without "tools" gets no ``tools``
(the agent's text-tool-call parser picks up JSON written as text); one without
"thinking" gets no ``think``. If the server still answers "... does not support
tools/thinking", the capability is switched off and the request retried once
without it.

``format`` may be a JSON schema (Ollama ≥ 0.5 enforces it with its grammar engine). A server
that refuses a schema (older versions answer 400 or 500) is remembered (``format_support``) and
``ConstraintsUnsupported`` raised, now and for later schema requests, without another try.
"""
from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import httpx
import structlog

from agent.llm.base import (
    ChatMessage,
    Completion,
    ConstraintsUnsupported,
    LLMError,
    ModelCapabilities,
    ModelNotFound,
    StreamChunk,
    ToolCallRequest,
)
from agent.llm.http_common import (
    as_dict,
    cap_tokens,
    check_network_guard,
    error_text,
    llm_client,
    loads_line,
    mentions_unsupported,
    new_call_id,
    parse_arguments,
    read_body,
    read_error_body,
    request_timeout,
    response_lines,
    timeout,
    transport_error,
)

log = structlog.get_logger(__name__)

SERVER = "Ollama server"
SETTING = "OLLAMA_HOST"
CAPABILITY_TTL = 600.0  # seconds; a re-pulled model may gain capabilities
SHOW_TIMEOUT = 15.0


class OllamaBackend:
    """LLMBackend for an Ollama server (``host`` like ``http://localhost:11434``).

    Without an injected ``client`` every call opens its own short-lived
    ``httpx.AsyncClient``: the backend is then safe to share between event loops
    (ASGI server, Celery worker threads), at the cost of one TCP connect per call.
    """

    name = "ollama"

    def __init__(
        self,
        host: str,
        *,
        keep_alive: str = "5m",
        connect_timeout: float = 5.0,
        read_timeout: float = 900.0,
        client: httpx.AsyncClient | None = None,
        max_tokens: int = 0,
    ) -> None:
        self.host = host.rstrip("/")
        self.keep_alive = keep_alive
        self.max_tokens = max_tokens  # 0: no limit (options.num_predict)
        self._timeout = timeout(connect_timeout, read_timeout)
        self._show_timeout = timeout(connect_timeout, SHOW_TIMEOUT)
        self._client = client
        self._caps: dict[str, tuple[ModelCapabilities, float]] = {}
        # Whether the server enforces a JSON-schema ``format``: None until one was sent.
        self.format_support: bool | None = None

    # -- public API -------------------------------------------------------------------------

    async def capabilities(self, model: str) -> ModelCapabilities:
        """What ``model`` supports; raises ModelNotFound / BackendUnreachable."""
        cached = self._caps.get(model)
        if cached is not None and time.monotonic() - cached[1] < CAPABILITY_TTL:
            return cached[0]
        url = f"{self.host}/api/show"
        check_network_guard(url, setting=SETTING)
        async with self._session() as client:
            try:
                response = await client.post(url, json={"model": model}, timeout=self._show_timeout)
            except httpx.HTTPError as exc:
                raise transport_error(exc, url=url, server=SERVER, setting=SETTING) from exc
        if response.status_code == 404:
            raise self._http_error(response, error_text(response.content), model)
        if response.status_code != 200:
            log.warning("ollama_show_failed", model=model, status=response.status_code,
                        error=error_text(response.content))
            return ModelCapabilities()
        caps = _parse_capabilities(response.content)
        self._remember(model, caps)
        return caps

    async def stream_complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool = False,
        temperature: float | None = None,
        num_ctx: int | None = None,
        format: dict[str, Any] | str | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamChunk]:
        """Stream the answer; ``aclose()`` on the generator closes the HTTP response. ``max_tokens``: a cap
        for this request (the lower of it and the backend's own)."""
        caps = await self.capabilities(model)

        def body(c: ModelCapabilities) -> dict[str, Any]:
            return self._body(messages, model=model, tools=tools, think=think, temperature=temperature,
                              num_ctx=num_ctx, format=format, caps=c, stream=True, max_tokens=max_tokens)

        async with self._session() as client:
            response = await self._send(client, model, body, caps)
            try:
                async for chunk in self._parse_stream(response):
                    yield chunk
            except httpx.HTTPError as exc:
                raise transport_error(exc, url=self._chat_url, server=SERVER, setting=SETTING) from exc
            finally:
                await response.aclose()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None = None,
        think: bool = False,
        temperature: float | None = None,
        num_ctx: int | None = None,
        format: dict[str, Any] | str | None = None,
    ) -> Completion:
        """The whole answer in one response (``stream: false``)."""
        caps = await self.capabilities(model)

        def body(c: ModelCapabilities) -> dict[str, Any]:
            return self._body(messages, model=model, tools=tools, think=think, temperature=temperature,
                              num_ctx=num_ctx, format=format, caps=c, stream=False)

        async with self._session() as client:
            response = await self._send(client, model, body, caps)
            try:
                raw = await read_body(response)
            except httpx.HTTPError as exc:
                raise transport_error(exc, url=self._chat_url, server=SERVER, setting=SETTING) from exc
            finally:
                await response.aclose()
        try:
            data = json.loads(raw)
        except ValueError:
            raise LLMError(f"the {SERVER} at {self.host} sent an answer that is not JSON: {raw[:200]!r}") from None
        if not isinstance(data, dict):
            raise LLMError(f"the {SERVER} at {self.host} sent an unexpected answer: {raw[:200]!r}")
        return _completion(data)

    # -- HTTP -------------------------------------------------------------------------------

    @property
    def _chat_url(self) -> str:
        return f"{self.host}/api/chat"

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._client is not None:
            yield self._client
            return
        async with llm_client(self._timeout) as client:
            yield client

    async def _send(
        self,
        client: httpx.AsyncClient,
        model: str,
        body_for: Callable[[ModelCapabilities], dict[str, Any]],
        caps: ModelCapabilities,
    ) -> httpx.Response:
        """POST /api/chat; on "does not support tools/thinking" degrade and retry."""
        url = self._chat_url
        check_network_guard(url, setting=SETTING)
        for _ in range(3):  # at most: as is, without tools, without think
            body = body_for(caps)
            schema = isinstance(body.get("format"), dict)
            if schema and self.format_support is False:
                raise self._no_constraints("refused before")
            request = client.build_request("POST", url, json=body, timeout=request_timeout(self._timeout, body))
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise transport_error(exc, url=url, server=SERVER, setting=SETTING) from exc
            if response.status_code == 200:
                self.format_support = True if schema else self.format_support
                return response
            try:
                err = await read_error_body(response)
            finally:
                await response.aclose()
            if schema and self.format_support is None and response.status_code in (400, 500) and (
                    "format" in err.lower() or "schema" in err.lower() or "unmarshal" in err.lower()):
                self.format_support = False
                log.info("ollama_schema_format_refused", host=self.host, model=model, error=err[:200])
                raise self._no_constraints(f"HTTP {response.status_code}: {err[:200]}")
            degraded = self._degrade(model, caps, err, body)
            if degraded is None:
                raise self._http_error(response, err, model)
            caps = degraded
        raise LLMError(f"the {SERVER} at {self.host} kept refusing the request for model {model}")

    def _degrade(
        self, model: str, caps: ModelCapabilities, err: str, body: dict[str, Any]
    ) -> ModelCapabilities | None:
        if "tools" in body and mentions_unsupported(err, "tools"):
            new = replace(caps, tools=False)
        elif "think" in body and mentions_unsupported(err, "thinking"):
            new = replace(caps, thinking=False)
        else:
            return None
        log.info("ollama_capability_degraded", model=model, host=self.host, error=err[:200],
                 tools=new.tools, thinking=new.thinking)
        self._remember(model, new)
        return new

    def _no_constraints(self, detail: str) -> ConstraintsUnsupported:
        return ConstraintsUnsupported(f"the {SERVER} at {self.host} does not take a JSON schema as `format` "
                                      f"(Ollama 0.5 or newer does; {detail})")

    def _remember(self, model: str, caps: ModelCapabilities) -> None:
        self._caps[model] = (caps, time.monotonic())

    def _not_found(self, model: str) -> ModelNotFound:
        return ModelNotFound(f"model {model} is not on the Ollama server at {self.host} — run `ollama pull {model}`")

    def _http_error(self, response: httpx.Response, err: str, model: str) -> LLMError:
        status = response.status_code
        lowered = err.lower()
        if (status == 404 and "model" in lowered) or ("model" in lowered and "not found" in lowered):
            return self._not_found(model)
        if status == 404:
            return LLMError(
                f"the server at {self.host} answered 404 for {response.request.url.path} ({err or 'no details'})"
                f" — is {SETTING} pointing at an Ollama server?"
            )
        detail = err or response.reason_phrase or "no details"
        return LLMError(f"the {SERVER} at {self.host} answered HTTP {status} for model {model}: {detail}")

    # -- wire format ------------------------------------------------------------------------

    def _body(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None,
        think: bool,
        temperature: float | None,
        num_ctx: int | None,
        format: dict[str, Any] | str | None,
        caps: ModelCapabilities,
        stream: bool,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": [message_to_wire(m) for m in messages],
            "stream": stream,
            "keep_alive": self.keep_alive,
        }
        if tools and caps.tools:
            body["tools"] = list(tools)
        if caps.thinking:
            body["think"] = think
        options: dict[str, Any] = {}
        if temperature is not None:
            options["temperature"] = temperature
        if num_ctx:
            options["num_ctx"] = num_ctx
        cap = cap_tokens(self.max_tokens, max_tokens)
        if cap:
            options["num_predict"] = cap
        if options:
            body["options"] = options
        if format is not None:
            body["format"] = format
        return body

    async def _parse_stream(self, response: httpx.Response) -> AsyncIterator[StreamChunk]:
        finished = False
        async for line in response_lines(response):
            data = _parse_line(line)
            if data is None:
                continue
            if "error" in data:
                raise LLMError(f"the {SERVER} at {self.host} reported an error mid-answer: {data['error']}")
            for chunk in chunks_from_line(data):
                yield chunk
            if data.get("done"):
                finished = True
                break
        if not finished:
            raise LLMError(
                f"the {SERVER} at {self.host} ended the answer before it was finished (no final 'done' line);"
                " the server may have crashed or been restarted — check its logs"
            )


def message_to_wire(message: ChatMessage) -> dict[str, Any]:
    """One ChatMessage as an Ollama ``/api/chat`` message."""
    wire: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.images:
        wire["images"] = [_strip_data_uri(image) for image in message.images]
    if message.tool_calls:
        wire["tool_calls"] = [
            {"function": {"name": call.name, "arguments": call.arguments}} for call in message.tool_calls
        ]
    if message.role == "tool" and message.name:
        wire["tool_name"] = message.name
    return wire


def _strip_data_uri(image: str) -> str:
    if image.startswith("data:") and "," in image:
        return image.split(",", 1)[1]
    return image


def _parse_line(line: str) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        data = loads_line(line)
    except ValueError:
        log.warning("ollama_malformed_line", line=line[:200])
        return None
    if not isinstance(data, dict):
        log.warning("ollama_unexpected_line", line=line[:200])
        return None
    return data


def chunks_from_line(data: dict[str, Any]) -> list[StreamChunk]:
    """The normalised chunks of one NDJSON line (thinking, text, tool calls, done)."""
    message = as_dict(data.get("message"))
    chunks: list[StreamChunk] = []
    thinking = message.get("thinking")
    if isinstance(thinking, str) and thinking:
        chunks.append(StreamChunk(kind="thinking", text=thinking))
    content = message.get("content")
    if isinstance(content, str) and content:
        chunks.append(StreamChunk(kind="text", text=content))
    calls = parse_tool_calls(message.get("tool_calls"))
    if calls:
        chunks.append(StreamChunk(kind="tool_calls", tool_calls=calls))
    if data.get("done"):
        chunks.append(StreamChunk(
            kind="done",
            done_reason=_str_or_none(data.get("done_reason")),
            prompt_eval_count=_int_or_none(data.get("prompt_eval_count")),
            eval_count=_int_or_none(data.get("eval_count")),
        ))
    return chunks


def parse_tool_calls(raw: Any) -> tuple[ToolCallRequest, ...]:
    """Ollama ``tool_calls`` (``[{"function": {"name", "arguments"}}]``) as ToolCallRequests."""
    if not isinstance(raw, list):
        return ()
    calls: list[ToolCallRequest] = []
    for item in raw:
        function = item.get("function") if isinstance(item, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(function, dict) or not isinstance(name, str) or not name:
            log.warning("ollama_tool_call_without_name", call=str(item)[:200])
            continue
        arguments, problem = parse_arguments(name, function.get("arguments"))
        call_id = item.get("id") if isinstance(item.get("id"), str) and item.get("id") else new_call_id()
        calls.append(ToolCallRequest(id=call_id, name=name, arguments=arguments, arguments_error=problem))
    return tuple(calls)


def _completion(data: dict[str, Any]) -> Completion:
    if "error" in data:
        raise LLMError(f"the {SERVER} reported an error: {data['error']}")
    message = as_dict(data.get("message"))
    return Completion(
        text=message.get("content") or "",
        thinking=message.get("thinking") or "",
        tool_calls=parse_tool_calls(message.get("tool_calls")),
        done_reason=_str_or_none(data.get("done_reason")),
        prompt_eval_count=_int_or_none(data.get("prompt_eval_count")),
        eval_count=_int_or_none(data.get("eval_count")),
    )


def _parse_capabilities(raw: bytes) -> ModelCapabilities:
    try:
        data = json.loads(raw)
    except ValueError:
        return ModelCapabilities()
    caps = data.get("capabilities") if isinstance(data, dict) else None
    if not isinstance(caps, list):  # Ollama before 0.6: no list; rely on the 400 fallback
        return ModelCapabilities()
    return ModelCapabilities(tools="tools" in caps, thinking="thinking" in caps, vision="vision" in caps)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
