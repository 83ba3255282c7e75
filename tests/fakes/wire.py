"""Scripted replies of the fake model server and their Ollama NDJSON / OpenAI SSE renderings."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TEXT = "Hello from the fake model."


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted answer of the fake server (see ``FakeLLMServer.script``)."""

    thinking: str = ""
    text: str = ""
    # [{"name": "get_time", "arguments": {...} | "raw json string"}, ...]
    tool_calls: tuple[dict[str, Any], ...] = ()
    done_reason: str | None = None  # None: "stop" (Ollama) / "tool_calls" or "stop" (OpenAI)
    prompt_eval_count: int = 12
    eval_count: int = 7
    token_size: int = 5  # characters per streamed delta
    chunk_size: int | None = None  # re-split the whole byte stream into HTTP chunks of this many bytes
    delay_between_chunks: float = 0.0
    hang_before_first_chunk: float = 0.0
    stall_after_chunks: int | None = None  # after N HTTP chunks, go silent for stall_seconds
    stall_seconds: float = 0.0
    drop_after_chunks: int | None = None  # abort the TCP connection after N HTTP chunks
    malformed_lines: bool = False  # blank lines, garbage and truncated JSON between the real lines
    http_status: int = 200
    error: str | None = None  # error text of a non-200 answer
    stream_error: str | None = None  # an {"error": ...} line after the content
    omit_done: bool = False  # end cleanly without the final done line / finish_reason / [DONE]
    raw_lines: tuple[str, ...] | None = None  # send exactly these lines (Ollama) or data payloads (OpenAI)
    fragment_size: int = 7  # OpenAI: characters per tool-argument fragment
    extra: dict[str, Any] = field(default_factory=dict)


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- Ollama ----------------------------------------------------------------------------------


def _ollama_line(model: str, message: dict[str, Any], done: bool = False, **extra: Any) -> str:
    payload = {"model": model, "created_at": _now(), "message": {"role": "assistant", "content": "", **message},
               "done": done, **extra}
    return json.dumps(payload)


def _ollama_calls(reply: Reply) -> list[dict[str, Any]]:
    return [{"function": {"name": c["name"], "arguments": c.get("arguments", {})}} for c in reply.tool_calls]


def ollama_lines(reply: Reply, model: str) -> list[str]:
    if reply.raw_lines is not None:
        return list(reply.raw_lines)
    lines = [_ollama_line(model, {"thinking": p}) for p in _pieces(reply.thinking, reply.token_size)]
    lines += [_ollama_line(model, {"content": p}) for p in _pieces(reply.text, reply.token_size)]
    if reply.tool_calls:
        lines.append(_ollama_line(model, {"tool_calls": _ollama_calls(reply)}))
    if reply.stream_error:
        lines.append(json.dumps({"error": reply.stream_error}))
    if not reply.omit_done:
        lines.append(_ollama_line(model, {}, True, done_reason=reply.done_reason or "stop", total_duration=1000,
                                  prompt_eval_count=reply.prompt_eval_count, eval_count=reply.eval_count))
    if reply.malformed_lines:
        lines = _with_garbage(lines, ["", "   ", "this is not json", '{"model": "x", "message": {"content": "tr', "[1, 2]"])
    return lines


def ollama_body(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.thinking:
        message["thinking"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = _ollama_calls(reply)
    return {"model": model, "created_at": _now(), "message": message, "done": True,
            "done_reason": reply.done_reason or "stop", "prompt_eval_count": reply.prompt_eval_count,
            "eval_count": reply.eval_count}


def ollama_stream(reply: Reply, model: str) -> list[bytes]:
    return _http_chunks([f"{line}\n".encode() for line in ollama_lines(reply, model)], reply.chunk_size)


# -- OpenAI ----------------------------------------------------------------------------------


def _openai_event(model: str, delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                       "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _arguments_text(call: dict[str, Any]) -> str:
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args)


def _openai_call_events(reply: Reply, model: str) -> list[str]:
    events: list[str] = []
    for index, call in enumerate(reply.tool_calls):
        head = {"index": index, "id": f"call_fake{index}", "type": "function",
                "function": {"name": call["name"], "arguments": ""}}
        events.append(_openai_event(model, {"tool_calls": [head]}))
        for fragment in _pieces(_arguments_text(call), reply.fragment_size):
            events.append(_openai_event(model, {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}))
    return events


def _usage(reply: Reply) -> dict[str, int]:
    return {"prompt_tokens": reply.prompt_eval_count, "completion_tokens": reply.eval_count,
            "total_tokens": reply.prompt_eval_count + reply.eval_count}


def openai_events(reply: Reply, model: str, include_usage: bool) -> list[str]:
    """The ``data:`` payloads of the SSE stream."""
    if reply.raw_lines is not None:
        return list(reply.raw_lines)
    events = [_openai_event(model, {"role": "assistant"})]
    events += [_openai_event(model, {"reasoning_content": p}) for p in _pieces(reply.thinking, reply.token_size)]
    events += [_openai_event(model, {"content": p}) for p in _pieces(reply.text, reply.token_size)]
    events += _openai_call_events(reply, model)
    if reply.stream_error:
        events.append(json.dumps({"error": {"message": reply.stream_error, "type": "server_error"}}))
    if reply.omit_done:
        return events
    finish = reply.done_reason or ("tool_calls" if reply.tool_calls else "stop")
    events.append(_openai_event(model, {}, finish))
    if include_usage:
        events.append(json.dumps({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [],
                                  "usage": _usage(reply)}))
    return [*events, "[DONE]"]


def openai_stream(reply: Reply, model: str, include_usage: bool) -> list[bytes]:
    events = [f"data: {payload}\n\n" for payload in openai_events(reply, model, include_usage)]
    if reply.malformed_lines:
        events = _with_garbage(events, [": keep-alive\n\n", "\n", "data: {broken json\n\n", "event: ping\n\n"])
    return _http_chunks([e.encode() for e in events], reply.chunk_size)


def openai_body(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_fake{i}", "type": "function", "function": {"name": c["name"], "arguments": _arguments_text(c)}}
            for i, c in enumerate(reply.tool_calls)
        ]
    finish = reply.done_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {"id": "chatcmpl-fake", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": _usage(reply)}


def openai_error(message: str, status: int) -> dict[str, Any]:
    code = "model_not_found" if status == 404 else None
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


# -- shared ----------------------------------------------------------------------------------


def _with_garbage(items: list[str], garbage: list[str]) -> list[str]:
    out: list[str] = []
    for i, item in enumerate(items):
        out.append(garbage[i % len(garbage)])
        out.append(item)
    return out


def _http_chunks(pieces: list[bytes], chunk_size: int | None) -> list[bytes]:
    if not chunk_size:
        return [p for p in pieces if p]
    data = b"".join(pieces)
    return [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)]
