"""The OpenAI-compatible backend: ``/chat/completions`` with SSE streaming.

Works with llama.cpp's server, vLLM, LM Studio, LiteLLM and hosted APIs. Tool
call arguments arrive as string fragments keyed by ``index`` and are assembled
here; ``delta.reasoning_content`` (or ``delta.reasoning``) becomes thinking;
the usage chunk (``stream_options.include_usage``) gives the token counts.

There is no capability probe: tools and thinking are assumed until a server
answers "... does not support tools", after which tools are left out for that
model (the agent's text-tool-call parser takes over).

Schema-constrained output (``format``, a JSON schema) is sent in the standard form
``{"type": "json_schema", "json_schema": {...}}`` (OpenAI, vLLM, llama.cpp's server) and,
when the server refuses that, as ``{"type": "json_object", "schema": {...}}``, the form
llama-cpp-python's server takes (it answers HTTP 500 to the first). The form that worked is
remembered for the server (``format_support``); a server that refuses both raises
``ConstraintsUnsupported`` from then on without another try.
"""
from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
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

SERVER = "OpenAI-compatible server"
SETTING = "OPENAI_BASE_URL"
# No probe exists: assume the model can do everything until the server says otherwise.
ASSUMED = ModelCapabilities(tools=True, thinking=True, vision=True)
# The forms of a JSON-schema response_format, in the order they are tried.
SCHEMA_FORMS = ("json_schema", "json_object")


class OpenAICompatBackend:
    """LLMBackend for an OpenAI-compatible server (``base_url`` like ``http://localhost:8080/v1``)."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str = "",
        connect_timeout: float = 5.0,
        read_timeout: float = 900.0,
        client: httpx.AsyncClient | None = None,
        max_tokens: int = 0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.max_tokens = max_tokens  # 0: no limit
        self._timeout = timeout(connect_timeout, read_timeout)
        self._client = client
        self._caps: dict[str, ModelCapabilities] = {}
        self._stream_options = True  # switched off for servers that reject stream_options
        self._schema_form = 0  # index into SCHEMA_FORMS: the form tried next / known to work
        # Whether the server enforces a JSON schema: None until a schema was sent, then True or False.
        self.format_support: bool | None = None

    async def capabilities(self, model: str) -> ModelCapabilities:
        return self._caps.get(model, ASSUMED)

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
        for this request (the lower of it and the backend's own).

        ``think`` and ``num_ctx`` have no standard OpenAI field and are not sent.
        """

        def body(c: ModelCapabilities) -> dict[str, Any]:
            return self._body(messages, model=model, tools=tools, temperature=temperature,
                              format=format, caps=c, stream=True, max_tokens=max_tokens)

        async with self._session() as client:
            response = await self._send(client, model, body)
            try:
                async for chunk in _parse_sse(response, self.base_url):
                    yield chunk
            except httpx.HTTPError as exc:
                raise transport_error(exc, url=self._url, server=SERVER, setting=SETTING) from exc
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
        def body(c: ModelCapabilities) -> dict[str, Any]:
            return self._body(messages, model=model, tools=tools, temperature=temperature,
                              format=format, caps=c, stream=False)

        async with self._session() as client:
            response = await self._send(client, model, body)
            try:
                raw = await read_body(response)
            except httpx.HTTPError as exc:
                raise transport_error(exc, url=self._url, server=SERVER, setting=SETTING) from exc
            finally:
                await response.aclose()
        try:
            data = json.loads(raw)
        except ValueError:
            raise LLMError(f"the {SERVER} at {self.base_url} sent an answer that is not JSON: {raw[:200]!r}") from None
        return _completion(data, self.base_url)

    # -- HTTP -------------------------------------------------------------------------------

    @property
    def _url(self) -> str:
        return f"{self.base_url}/chat/completions"

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._client is not None:
            yield self._client
            return
        async with llm_client(self._timeout) as client:
            yield client

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream, application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _send(
        self, client: httpx.AsyncClient, model: str, body_for: Callable[[ModelCapabilities], dict[str, Any]]
    ) -> httpx.Response:
        """POST /chat/completions; on "does not support tools" (or stream_options) degrade and retry."""
        check_network_guard(self._url, setting=SETTING)
        for _ in range(2 + len(SCHEMA_FORMS)):
            body = body_for(self._caps.get(model, ASSUMED))
            request = client.build_request("POST", self._url, json=body, headers=self._headers(),
                                           timeout=request_timeout(self._timeout, body))
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise transport_error(exc, url=self._url, server=SERVER, setting=SETTING) from exc
            if response.status_code == 200:
                if _schema_form(body) is not None:
                    self.format_support = True
                return response
            try:
                err = await read_error_body(response)
            finally:
                await response.aclose()
            if not self._degrade(model, err, body, response.status_code):
                raise self._http_error(response.status_code, err, model)
        raise LLMError(f"the {SERVER} at {self.base_url} kept refusing the request for model {model}")

    def _degrade(self, model: str, err: str, body: dict[str, Any], status: int) -> bool:
        if _schema_form(body) is not None and self.format_support is not True and status not in (401, 403, 404):
            return self._next_schema_form(model, err, status)
        if "tools" in body and mentions_unsupported(err, "tools"):
            self._caps[model] = replace(self._caps.get(model, ASSUMED), tools=False)
        elif "stream_options" in body and "stream_options" in err:
            self._stream_options = False
        else:
            return False
        log.info("openai_capability_degraded", model=model, base_url=self.base_url, error=err[:200])
        return True

    def _next_schema_form(self, model: str, err: str, status: int) -> bool:
        """The server refused a schema in the current form: try the next one, or give up for this server."""
        tried = SCHEMA_FORMS[self._schema_form]
        if self._schema_form + 1 < len(SCHEMA_FORMS):
            self._schema_form += 1
            log.info("openai_schema_form_refused", base_url=self.base_url, model=model, form=tried,
                     next_form=SCHEMA_FORMS[self._schema_form], status=status, error=err[:200])
            return True
        self.format_support = False
        raise self._no_constraints(f"HTTP {status}: {err[:200] or 'no details'}")

    def _no_constraints(self, detail: str) -> ConstraintsUnsupported:
        return ConstraintsUnsupported(
            f"the {SERVER} at {self.base_url} does not take a JSON schema for constrained output "
            f"(response_format as {' or '.join(SCHEMA_FORMS)}; {detail})")

    def _http_error(self, status: int, err: str, model: str) -> LLMError:
        lowered = err.lower()
        detail = err or "no details"
        if "model" in lowered and ("not found" in lowered or "does not exist" in lowered or status == 404):
            return ModelNotFound(
                f"model {model} is not available at {self.base_url} ({detail}) — check the profile's model name;"
                f" GET {self.base_url}/models lists the server's models"
            )
        if status == 404:
            return LLMError(
                f"the server at {self.base_url} answered 404 for /chat/completions ({detail}) — "
                f"does {SETTING} include the API prefix (usually /v1)?"
            )
        if status in (401, 403):
            return LLMError(f"the {SERVER} at {self.base_url} refused the request (HTTP {status}: {detail}) — "
                            "check OPENAI_API_KEY")
        return LLMError(f"the {SERVER} at {self.base_url} answered HTTP {status} for model {model}: {detail}")

    def _body(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None,
        temperature: float | None,
        format: dict[str, Any] | str | None,
        caps: ModelCapabilities,
        stream: bool,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": [message_to_wire(m) for m in messages], "stream": stream}
        if stream and self._stream_options:
            body["stream_options"] = {"include_usage": True}
        if tools and caps.tools:
            body["tools"] = list(tools)
        if temperature is not None:
            body["temperature"] = temperature
        cap = cap_tokens(self.max_tokens, max_tokens)
        if cap:
            body["max_tokens"] = cap
        if format is not None:
            if isinstance(format, dict) and self.format_support is False:
                raise self._no_constraints("refused before")
            body["response_format"] = response_format(format, SCHEMA_FORMS[self._schema_form])
        return body


def _schema_form(body: dict[str, Any]) -> str | None:
    """The form of the JSON-schema response_format in ``body``, if it carries one."""
    rf = body.get("response_format")
    if not isinstance(rf, dict):
        return None
    if rf.get("type") == "json_schema":
        return "json_schema"
    return "json_object" if "schema" in rf else None


def response_format(format: dict[str, Any] | str, form: str = SCHEMA_FORMS[0]) -> dict[str, Any]:
    """Ollama-style ``format`` ("json" or a JSON schema) as an OpenAI ``response_format`` in ``form``:
    "json_schema" (the standard) or "json_object" (with the schema beside it: llama-cpp-python)."""
    if not isinstance(format, dict):
        return {"type": "json_object"}
    if form == "json_object":
        return {"type": "json_object", "schema": format}
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": format}}


def message_to_wire(message: ChatMessage) -> dict[str, Any]:
    """One ChatMessage as an OpenAI chat message."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content or ""}
    wire: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.images and message.role == "user":
        parts: list[dict[str, Any]] = [{"type": "text", "text": message.content or ""}]
        parts += [{"type": "image_url", "image_url": {"url": data_uri(image)}} for image in message.images]
        wire["content"] = parts
    if message.tool_calls:
        wire["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
            for call in message.tool_calls
        ]
    return wire


_MAGIC = {"iVBOR": "image/png", "/9j/": "image/jpeg", "R0lGOD": "image/gif", "UklGR": "image/webp"}


def data_uri(image: str) -> str:
    if image.startswith("data:"):
        return image
    mime = next((m for prefix, m in _MAGIC.items() if image.startswith(prefix)), "image/png")
    return f"data:{mime};base64,{image}"


@dataclass(slots=True)
class _PartialCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _StreamState:
    """Accumulates tool-call fragments, finish reason and usage across SSE events."""

    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    def feed(self, data: dict[str, Any]) -> list[StreamChunk]:
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = _int(usage.get("prompt_tokens"))
            self.completion_tokens = _int(usage.get("completion_tokens"))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return []
        choice = choices[0]
        delta = as_dict(choice.get("delta"))
        chunks: list[StreamChunk] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            chunks.append(StreamChunk(kind="thinking", text=reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            chunks.append(StreamChunk(kind="text", text=content))
        self.add_fragments(delta.get("tool_calls"))
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]
            chunks += self.flush_calls()
        return chunks

    def add_fragments(self, raw: Any) -> None:
        if not isinstance(raw, list):
            return
        for position, item in enumerate(raw):
            if not isinstance(item, dict):
                continue
            index = item.get("index")
            if not isinstance(index, int):
                index = self._index_for_id(item.get("id"), position)
            partial = self.calls.setdefault(index, _PartialCall())
            if isinstance(item.get("id"), str) and item["id"]:
                partial.id = item["id"]
            function = as_dict(item.get("function"))
            if isinstance(function.get("name"), str):
                partial.name += function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                partial.arguments.append(arguments)
            elif isinstance(arguments, dict):
                partial.arguments.append(json.dumps(arguments))

    def _index_for_id(self, call_id: Any, position: int) -> int:
        for index, partial in self.calls.items():
            if call_id and partial.id == call_id:
                return index
        return len(self.calls) if call_id else position

    def flush_calls(self) -> list[StreamChunk]:
        if not self.calls:
            return []
        calls = tuple(_finish_call(p) for _, p in sorted(self.calls.items()) if p.name)
        self.calls.clear()
        return [StreamChunk(kind="tool_calls", tool_calls=calls)] if calls else []

    def done(self) -> StreamChunk:
        return StreamChunk(kind="done", done_reason=self.finish_reason,
                           prompt_eval_count=self.prompt_tokens, eval_count=self.completion_tokens)


def _finish_call(partial: _PartialCall) -> ToolCallRequest:
    arguments, problem = parse_arguments(partial.name, "".join(partial.arguments))
    return ToolCallRequest(id=partial.id or new_call_id(), name=partial.name, arguments=arguments,
                           arguments_error=problem)


async def _parse_sse(response: httpx.Response, base_url: str) -> AsyncIterator[StreamChunk]:
    state = _StreamState()
    saw_done = False
    async for line in response_lines(response):
        if not line.startswith("data:"):
            continue  # blank separators, ": comments", event:/id:/retry: fields
        payload = line[5:].strip()
        if payload == "[DONE]":
            saw_done = True
            break
        try:
            data = loads_line(payload)
        except ValueError:
            log.warning("openai_malformed_event", line=line[:200])
            continue
        if not isinstance(data, dict):
            continue
        if data.get("error"):
            raise LLMError(f"the {SERVER} at {base_url} reported an error mid-answer: {_error_message(data)}")
        for chunk in state.feed(data):
            yield chunk
    if not saw_done and state.finish_reason is None:
        raise LLMError(
            f"the {SERVER} at {base_url} ended the answer before it was finished (no finish_reason, no [DONE]);"
            " the server may have crashed — check its logs"
        )
    for chunk in state.flush_calls():
        yield chunk
    yield state.done()


def _completion(data: Any, base_url: str) -> Completion:
    if not isinstance(data, dict) or data.get("error"):
        raise LLMError(f"the {SERVER} at {base_url} reported an error: {_error_message(data)}")
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = as_dict(choice.get("message"))
    state = _StreamState()
    state.add_fragments(message.get("tool_calls"))
    calls = state.flush_calls()
    usage = as_dict(data.get("usage"))
    return Completion(
        text=message.get("content") or "",
        thinking=message.get("reasoning_content") or message.get("reasoning") or "",
        tool_calls=calls[0].tool_calls if calls else (),
        done_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        prompt_eval_count=_int(usage.get("prompt_tokens")),
        eval_count=_int(usage.get("completion_tokens")),
    )


def _error_message(data: Any) -> str:
    err = data.get("error") if isinstance(data, dict) else data
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
