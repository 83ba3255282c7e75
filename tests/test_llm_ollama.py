"""OllamaBackend against the fake Ollama server over real HTTP."""
# ruff: noqa: F811  (the fixture import below is re-bound by each test's parameter)
from __future__ import annotations

import asyncio
import gzip
import socket
from collections.abc import AsyncIterator

import httpx
import pytest

from agent.llm import http_common
from agent.llm.base import (
    BackendUnreachable,
    ChatMessage,
    LLMError,
    ModelCapabilities,
    ModelNotFound,
    StreamChunk,
    ToolCallRequest,
)
from agent.llm.http_common import iter_lines, llm_client, response_lines
from agent.llm.ollama import OllamaBackend, message_to_wire
from tests.fakes.fake_llm import FakeLLMServer
from tests.fakes.fixtures import fake_ollama  # noqa: F401

HI = [ChatMessage(role="user", content="hi")]
TOOLS = [{"type": "function", "function": {"name": "get_time", "description": "now", "parameters": {}}}]


async def collect(gen: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in gen]


def joined(chunks: list[StreamChunk], kind: str) -> str:
    return "".join(c.text for c in chunks if c.kind == kind)


def calls_of(chunks: list[StreamChunk]) -> list[ToolCallRequest]:
    return [call for c in chunks if c.kind == "tool_calls" for call in c.tool_calls]


async def test_stream_thinking_text_and_done_counts(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(thinking="Let me think about it.", text="The answer is 42.", done_reason="stop",
                       prompt_eval_count=321, eval_count=17)
    chunks = await collect(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m", think=True))
    assert joined(chunks, "thinking") == "Let me think about it."
    assert joined(chunks, "text") == "The answer is 42."
    assert [c.kind for c in chunks][-1] == "done"
    done = chunks[-1]
    assert (done.done_reason, done.prompt_eval_count, done.eval_count) == ("stop", 321, 17)
    kinds = [c.kind for c in chunks]
    assert kinds.index("text") > kinds.index("thinking")


async def test_request_body(fake_ollama: FakeLLMServer) -> None:
    backend = OllamaBackend(fake_ollama.url, keep_alive="10m")
    messages = [
        ChatMessage(role="system", content="be nice"),
        ChatMessage(role="user", content="what is this?", images=("aGVsbG8=",)),
        ChatMessage(role="assistant", content="", tool_calls=(ToolCallRequest(id="c1", name="get_time", arguments={"tz": "UTC"}),)),
        ChatMessage(role="tool", content="12:00", tool_call_id="c1", name="get_time"),
    ]
    await collect(backend.stream_complete(messages, model="m", tools=TOOLS, think=True, temperature=0.3,
                                          num_ctx=4096, format="json"))
    body = fake_ollama.last_chat.json
    assert body["model"] == "m" and body["stream"] is True and body["keep_alive"] == "10m"
    assert body["think"] is True and body["tools"] == TOOLS and body["format"] == "json"
    assert body["options"] == {"temperature": 0.3, "num_ctx": 4096}
    assert body["messages"] == [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "what is this?", "images": ["aGVsbG8="]},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_time", "arguments": {"tz": "UTC"}}}]},
        {"role": "tool", "content": "12:00", "tool_name": "get_time"},
    ]


def test_message_to_wire_strips_data_uri() -> None:
    wire = message_to_wire(ChatMessage(role="user", content="x", images=("data:image/png;base64,QUJD",)))
    assert wire["images"] == ["QUJD"]


async def test_tool_calls_object_string_and_invalid_arguments(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(tool_calls=[
        {"name": "get_time", "arguments": {"tz": "UTC"}},
        {"name": "web_search", "arguments": '{"query": "navi"}'},
        {"name": "broken", "arguments": '{"query": "unterminated'},
        {"name": "listy", "arguments": "[1, 2]"},
    ])
    calls = calls_of(await collect(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m", tools=TOOLS)))
    assert [(c.name, c.arguments, c.arguments_error is None) for c in calls] == [
        ("get_time", {"tz": "UTC"}, True),
        ("web_search", {"query": "navi"}, True),
        ("broken", {}, False),
        ("listy", {}, False),
    ]
    assert "not valid JSON" in (calls[2].arguments_error or "")
    assert all(c.id.startswith("call_") and len(c.id) > 8 for c in calls)
    assert len({c.id for c in calls}) == 4


async def test_lines_split_across_reads(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(thinking="hmm " * 5, text="split into tiny pieces", chunk_size=7, delay_between_chunks=0.001)
    chunks = await collect(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m", think=True))
    assert joined(chunks, "text") == "split into tiny pieces"
    assert joined(chunks, "thinking") == "hmm " * 5
    assert chunks[-1].kind == "done"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 13, 64])
async def test_iter_lines_any_split(size: int) -> None:
    data = b'{"a": 1}\n\n{"b": "\xc3\xa9"}\r\nlast'

    async def pieces() -> AsyncIterator[bytes]:
        for i in range(0, len(data), size):
            yield data[i : i + size]

    assert [line async for line in iter_lines(pieces())] == ['{"a": 1}', "", '{"b": "é"}', "last"]


async def test_blank_and_malformed_lines_are_skipped(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(thinking="think", text="still fine", malformed_lines=True, eval_count=5)
    chunks = await collect(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m", think=True))
    assert joined(chunks, "text") == "still fine"
    assert joined(chunks, "thinking") == "think"
    assert chunks[-1].kind == "done" and chunks[-1].eval_count == 5


async def test_model_not_found(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.known_models = {"llama3.2"}
    with pytest.raises(ModelNotFound) as err:
        await collect(OllamaBackend(fake_ollama.url).stream_complete(HI, model="qwen9:1b"))
    assert str(err.value) == (
        f"model qwen9:1b is not on the Ollama server at {fake_ollama.url} — run `ollama pull qwen9:1b`"
    )


async def test_chat_404_is_model_not_found(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(http_status=404, error="model 'm' not found")
    with pytest.raises(ModelNotFound, match="ollama pull m"):
        await OllamaBackend(fake_ollama.url).complete(HI, model="m")


async def test_other_http_error_has_status_and_text(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(http_status=500, error="llama runner process has terminated: out of memory")
    with pytest.raises(LLMError) as err:
        await collect(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m"))
    assert not isinstance(err.value, ModelNotFound)
    assert "HTTP 500" in str(err.value) and "out of memory" in str(err.value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused_names_url() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(BackendUnreachable) as err:
        await collect(OllamaBackend(url, connect_timeout=1.0).stream_complete(HI, model="m"))
    assert url in str(err.value) and "OLLAMA_HOST" in str(err.value)
    assert str(err.value).startswith("cannot connect to the Ollama server"), err.value  # not "timed out"


async def test_a_non_http_url_is_not_called_a_broken_answer() -> None:
    with pytest.raises(LLMError) as err:
        await collect(OllamaBackend("ftp://127.0.0.1:1").stream_complete(HI, model="m"))
    assert str(err.value).startswith("the Ollama server address ftp://127.0.0.1:1"), err.value
    assert "not an http:// or https:// URL — check OLLAMA_HOST" in str(err.value)


async def test_network_guard_refuses_non_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAVI_TEST_NETWORK_GUARD", "1")
    with pytest.raises(BackendUnreachable, match="only loopback"):
        await collect(OllamaBackend("http://ollama.example.com:11434").stream_complete(HI, model="m"))
    with pytest.raises(BackendUnreachable, match="only loopback"):
        await OllamaBackend("http://10.1.2.3:11434").complete(HI, model="m")


async def test_server_dies_mid_stream(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="this answer will be cut off", drop_after_chunks=2)
    seen: list[StreamChunk] = []
    with pytest.raises(LLMError, match="broke off in the middle of the answer"):
        async for chunk in OllamaBackend(fake_ollama.url).stream_complete(HI, model="m"):
            seen.append(chunk)
    assert joined(seen, "text") == "this answer"[:10]


async def test_stream_without_done_line(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="no ending", omit_done=True)
    with pytest.raises(LLMError, match="no final 'done' line"):
        await collect(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m"))


async def test_error_line_mid_stream(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="partial", stream_error="model runner crashed")
    with pytest.raises(LLMError, match="model runner crashed"):
        await collect(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m"))


async def test_capabilities_from_show_are_cached(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.set_capabilities("vis", ["completion", "vision"])
    backend = OllamaBackend(fake_ollama.url)
    assert await backend.capabilities("vis") == ModelCapabilities(tools=False, thinking=False, vision=True)
    assert await backend.capabilities("vis") == ModelCapabilities(tools=False, thinking=False, vision=True)
    assert [r.path for r in fake_ollama.requests].count("/api/show") == 1


async def test_model_without_tools_or_thinking_gets_neither(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.set_capabilities("tiny", ["completion"])
    fake_ollama.script(text='{"name": "get_time", "arguments": {}}')
    chunks = await collect(OllamaBackend(fake_ollama.url).stream_complete(HI, model="tiny", tools=TOOLS, think=True))
    assert joined(chunks, "text") == '{"name": "get_time", "arguments": {}}'
    body = fake_ollama.last_chat.json
    assert "tools" not in body and "think" not in body


async def test_degrades_when_server_rejects_tools(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(http_status=400, error="registry.ollama.ai/library/m does not support tools")
    fake_ollama.script(text="ok without tools")
    backend = OllamaBackend(fake_ollama.url)
    chunks = await collect(backend.stream_complete(HI, model="m", tools=TOOLS, think=True))
    assert joined(chunks, "text") == "ok without tools"
    first, second = fake_ollama.chat_requests
    assert "tools" in first.json and "tools" not in second.json and second.json["think"] is True
    assert (await backend.capabilities("m")).tools is False
    await backend.complete(HI, model="m", tools=TOOLS)  # remembered: no third 400
    assert "tools" not in fake_ollama.last_chat.json


async def test_degrades_when_server_rejects_thinking(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(http_status=400, error='"m" does not support thinking')
    completion = await OllamaBackend(fake_ollama.url).complete(HI, model="m", think=True)
    assert completion.text == "Hello from the fake model."
    assert [("think" in r.json) for r in fake_ollama.chat_requests] == [True, False]


async def test_complete_non_streaming(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(thinking="t", text="whole answer", tool_calls=[{"name": "get_time", "arguments": "{}"}],
                       prompt_eval_count=9, eval_count=4)
    completion = await OllamaBackend(fake_ollama.url).complete(HI, model="m", think=True)
    assert fake_ollama.last_chat.json["stream"] is False
    assert (completion.text, completion.thinking) == ("whole answer", "t")
    assert completion.tool_calls[0].name == "get_time" and completion.tool_calls[0].arguments == {}
    assert (completion.done_reason, completion.prompt_eval_count, completion.eval_count) == ("stop", 9, 4)


async def test_aclose_closes_the_http_response(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="x" * 200, token_size=1, delay_between_chunks=0.01)
    gen = OllamaBackend(fake_ollama.url).stream_complete(HI, model="m")
    first = await gen.__anext__()
    assert first.kind == "text"
    await gen.aclose()
    assert await fake_ollama.wait_for(lambda f: f.closed_by_client == 1 and f.open_streams == 0)
    assert fake_ollama.completed_streams == 0


async def _serve_pieces(pieces: list[bytes], headers: bytes = b"") -> tuple[asyncio.base_events.Server, str]:
    """A one-route HTTP server that writes the body in ``pieces`` (each its own TCP write)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n%s\r\n" % headers)
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.002)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


async def _lines_of(url: str, *, direct: bool = True) -> list[str]:
    async with llm_client(httpx.Timeout(5.0)) as client, client.stream("GET", url) as response:
        assert (http_common.aiohttp_buffer(response) is not None) is direct  # which path is tested
        return [line async for line in response_lines(response)]


@pytest.mark.parametrize("size", [1, 3, 9, 64])
async def test_response_lines_from_aiohttps_buffer_any_split(size: int) -> None:
    data = b'{"a": 1}\n\n{"b": "\xc3\xa9"}\r\n{"c": 3}\nlast'
    server, url = await _serve_pieces([data[i : i + size] for i in range(0, len(data), size)])
    async with server:
        assert await _lines_of(url) == ['{"a": 1}', "", '{"b": "é"}', '{"c": 3}', "last"]


async def test_response_lines_of_a_compressed_body_are_decoded() -> None:
    body = gzip.compress(b'{"a": 1}\n{"b": 2}\n')
    server, url = await _serve_pieces([body[:10], body[10:]], b"Content-Encoding: gzip\r\n")
    async with server:
        assert await _lines_of(url, direct=False) == ['{"a": 1}', '{"b": 2}']


async def test_response_lines_refuse_an_endless_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_common, "MAX_LINE", 1000)
    server, url = await _serve_pieces([b"x" * 600, b"x" * 600, b"\n"])
    async with server:
        with pytest.raises(LLMError, match="line longer than"):
            await _lines_of(url)


def test_streamed_lines_parse_like_json_even_where_orjson_is_stricter() -> None:
    import json

    for text in ('{"message": {"content": "h\\u00e9 ✓"}, "done": false}',
                 '{"message": {"content": "\\ud83d"}}',  # a lone surrogate (a model cut mid-emoji)
                 '{"message": {"tool_calls": [{"function": {"arguments": {"id": 123456789012345678901}}}]}}'):
        assert http_common.loads_line(text) == json.loads(text)
    with pytest.raises(ValueError):
        http_common.loads_line('{"message": ')


async def test_a_stream_is_timed_by_the_guard_not_by_the_read_timeout(fake_ollama: FakeLLMServer) -> None:
    # A silence longer than the backend's read timeout: only the stream guard (which the agent
    # always reads streams under, with LLM_STREAM_*_TIMEOUT) may end a stream.
    fake_ollama.script(text="slow but steady", chunk_size=5, stall_after_chunks=1, stall_seconds=0.6)
    backend = OllamaBackend(fake_ollama.url, read_timeout=0.2)
    assert joined(await collect(backend.stream_complete(HI, model="m")), "text") == "slow but steady"
    fake_ollama.script(text="too slow", hang_before_first_chunk=0.6)  # a whole answer: the read timeout holds
    with pytest.raises(LLMError):
        await backend.complete(HI, model="m")


async def test_a_schema_format_is_sent_and_an_old_server_that_refuses_it_is_remembered(
        fake_ollama: FakeLLMServer) -> None:
    from agent.llm.base import ConstraintsUnsupported

    schema = {"type": "object", "properties": {"action": {"const": "answer"}}}
    backend = OllamaBackend(fake_ollama.url)
    fake_ollama.script(text='{"action": "answer"}')
    await backend.complete([ChatMessage(role="user", content="hi")], model="m", format=schema)
    assert fake_ollama.last_chat.json["format"] == schema and backend.format_support is True

    old = OllamaBackend(fake_ollama.url)
    fake_ollama.ollama_schema_format = False
    with pytest.raises(ConstraintsUnsupported, match="does not take a JSON schema"):
        await old.complete([ChatMessage(role="user", content="hi")], model="m", format=schema)
    sent = len(fake_ollama.chat_requests)
    with pytest.raises(ConstraintsUnsupported, match="refused before"):
        await old.complete([ChatMessage(role="user", content="hi")], model="m", format=schema)
    assert len(fake_ollama.chat_requests) == sent and old.format_support is False
