"""OpenAICompatBackend against the fake server's /v1/chat/completions (SSE) over real HTTP."""
# ruff: noqa: F811  (the fixture import below is re-bound by each test's parameter)
from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest

from agent.llm.base import (
    BackendUnreachable,
    ChatMessage,
    LLMError,
    ModelCapabilities,
    ModelNotFound,
    StreamChunk,
    ToolCallRequest,
)
from agent.llm.openai_compat import OpenAICompatBackend, message_to_wire, response_format
from tests.fakes.fake_llm import FakeLLMServer
from tests.fakes.fixtures import fake_openai  # noqa: F401

HI = [ChatMessage(role="user", content="hi")]
TOOLS = [{"type": "function", "function": {"name": "get_time", "description": "now", "parameters": {}}}]


async def collect(gen: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in gen]


def joined(chunks: list[StreamChunk], kind: str) -> str:
    return "".join(c.text for c in chunks if c.kind == kind)


async def test_stream_reasoning_text_usage_done(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(thinking="Reasoning here.", text="Final answer.", prompt_eval_count=40, eval_count=6)
    chunks = await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m"))
    assert joined(chunks, "thinking") == "Reasoning here."
    assert joined(chunks, "text") == "Final answer."
    done = chunks[-1]
    assert (done.kind, done.done_reason, done.prompt_eval_count, done.eval_count) == ("done", "stop", 40, 6)
    body = fake_openai.last_chat.json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_tool_call_argument_fragments_are_assembled(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(text="Let me check.", fragment_size=3, tool_calls=[
        {"name": "get_time", "arguments": {"timezone": "Europe/Berlin", "format": "24h"}},
        {"name": "web_search", "arguments": {"query": "weather in Berlin"}},
    ])
    chunks = await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m", tools=TOOLS))
    (calls_chunk,) = [c for c in chunks if c.kind == "tool_calls"]
    assert [(c.id, c.name, c.arguments) for c in calls_chunk.tool_calls] == [
        ("call_fake0", "get_time", {"timezone": "Europe/Berlin", "format": "24h"}),
        ("call_fake1", "web_search", {"query": "weather in Berlin"}),
    ]
    assert chunks[-1].done_reason == "tool_calls"
    assert fake_openai.last_chat.json["tools"] == TOOLS


async def test_invalid_tool_arguments(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(tool_calls=[{"name": "get_time", "arguments": '{"tz": '}])
    chunks = await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m", tools=TOOLS))
    (call,) = [c for chunk in chunks for c in chunk.tool_calls]
    assert call.arguments == {} and "not valid JSON" in (call.arguments_error or "")


async def test_split_reads_and_malformed_events(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(thinking="abc", text="robust", malformed_lines=True, chunk_size=5, delay_between_chunks=0.001,
                       tool_calls=[{"name": "get_time", "arguments": {"a": 1}}])
    chunks = await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m"))
    assert (joined(chunks, "thinking"), joined(chunks, "text")) == ("abc", "robust")
    assert [c.name for chunk in chunks for c in chunk.tool_calls] == ["get_time"]


async def test_api_key_format_images_and_messages(fake_openai: FakeLLMServer) -> None:
    backend = OpenAICompatBackend(fake_openai.openai_url, api_key="sk-test")
    messages = [
        ChatMessage(role="user", content="look", images=("iVBORw0KGgo=",)),
        ChatMessage(role="assistant", content="", tool_calls=(ToolCallRequest(id="c1", name="get_time", arguments={"x": 1}),)),
        ChatMessage(role="tool", content="noon", tool_call_id="c1", name="get_time"),
    ]
    await collect(backend.stream_complete(messages, model="m", format={"type": "object"}, temperature=0.1))
    request = fake_openai.last_chat
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json["temperature"] == 0.1
    assert request.json["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}
    assert request.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": '{"x": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "noon"},
    ]
    assert response_format("json") == {"type": "json_object"}


async def test_no_api_key_no_header(fake_openai: FakeLLMServer) -> None:
    await OpenAICompatBackend(fake_openai.openai_url).complete(HI, model="m")
    assert "authorization" not in fake_openai.last_chat.headers


def test_jpeg_data_uri() -> None:
    wire = message_to_wire(ChatMessage(role="user", content="", images=("/9j/4AAQ",)))
    assert wire["content"][1]["image_url"]["url"] == "data:image/jpeg;base64,/9j/4AAQ"


async def test_complete_non_streaming(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(thinking="why", text="done", tool_calls=[{"name": "get_time", "arguments": {"a": 1}}],
                       prompt_eval_count=3, eval_count=2)
    completion = await OpenAICompatBackend(fake_openai.openai_url).complete(HI, model="m")
    assert fake_openai.last_chat.json["stream"] is False
    assert (completion.text, completion.thinking, completion.done_reason) == ("done", "why", "tool_calls")
    assert completion.tool_calls[0].arguments == {"a": 1}
    assert (completion.prompt_eval_count, completion.eval_count) == (3, 2)


async def test_model_not_found(fake_openai: FakeLLMServer) -> None:
    fake_openai.known_models = {"other"}
    with pytest.raises(ModelNotFound) as err:
        await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="gpt-x"))
    assert "model gpt-x is not available at" in str(err.value) and fake_openai.openai_url in str(err.value)


async def test_wrong_base_url_404(fake_openai: FakeLLMServer) -> None:
    with pytest.raises(LLMError, match="/v1"):
        await OpenAICompatBackend(fake_openai.url).complete(HI, model="m")  # missing /v1


async def test_http_error_has_status_and_text(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(http_status=401, error="invalid api key")
    with pytest.raises(LLMError) as err:
        await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m"))
    assert "HTTP 401" in str(err.value) and "invalid api key" in str(err.value) and "OPENAI_API_KEY" in str(err.value)


async def test_connection_refused_names_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(BackendUnreachable) as err:
        await collect(OpenAICompatBackend(url).stream_complete(HI, model="m"))
    assert f"{url}/chat/completions" in str(err.value) and "OPENAI_BASE_URL" in str(err.value)


async def test_server_dies_mid_stream(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(text="cut short answer", drop_after_chunks=3)
    with pytest.raises(LLMError, match="broke off"):
        await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m"))


async def test_stream_ends_without_finish(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(text="no end", omit_done=True)
    with pytest.raises(LLMError, match="before it was finished"):
        await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m"))


async def test_error_event_mid_stream(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(text="partial", stream_error="context length exceeded")
    with pytest.raises(LLMError, match="context length exceeded"):
        await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m"))


async def test_degrades_when_tools_unsupported(fake_openai: FakeLLMServer) -> None:
    fake_openai.set_capabilities("small", ["completion"])
    backend = OpenAICompatBackend(fake_openai.openai_url)
    assert await backend.capabilities("small") == ModelCapabilities(tools=True, thinking=True, vision=True)
    chunks = await collect(backend.stream_complete(HI, model="small", tools=TOOLS))
    assert joined(chunks, "text") == "Hello from the fake model."
    assert [("tools" in r.json) for r in fake_openai.chat_requests] == [True, False]
    assert (await backend.capabilities("small")).tools is False


async def test_reasoning_field_alias(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(raw_lines=[
        '{"choices": [{"index": 0, "delta": {"reasoning": "via reasoning"}, "finish_reason": null}]}',
        '{"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}',
        "[DONE]",
    ])
    chunks = await collect(OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m"))
    assert (joined(chunks, "thinking"), joined(chunks, "text")) == ("via reasoning", "ok")
    assert chunks[-1].done_reason == "stop" and chunks[-1].eval_count is None


async def test_aclose_closes_connection(fake_openai: FakeLLMServer) -> None:
    fake_openai.script(text="y" * 100, token_size=1, delay_between_chunks=0.01)
    gen = OpenAICompatBackend(fake_openai.openai_url).stream_complete(HI, model="m")
    await gen.__anext__()
    await gen.aclose()
    assert await fake_openai.wait_for(lambda f: f.closed_by_client == 1 and f.open_streams == 0)


# -- schema-constrained output: which form a server takes, remembered per server (issue 24) ---------

SCHEMA = {"type": "object", "properties": {"action": {"const": "answer"}}, "required": ["action"]}


async def test_a_server_refusing_json_schema_gets_the_schema_as_json_object_and_it_is_remembered(
        fake_openai: FakeLLMServer) -> None:
    fake_openai.schema_forms = {"json_object"}  # llama-cpp-python: HTTP 500 for {"type": "json_schema"}
    backend = OpenAICompatBackend(fake_openai.openai_url)
    fake_openai.script(text='{"action": "answer"}')
    chunks = await collect(backend.stream_complete(HI, model="m", format=SCHEMA))
    assert joined(chunks, "text") == '{"action": "answer"}'
    first, second = fake_openai.chat_requests
    assert first.json["response_format"]["type"] == "json_schema"
    assert second.json["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert backend.format_support is True
    fake_openai.script(text='{"action": "answer"}')
    await backend.complete(HI, model="m", format=SCHEMA)
    assert len(fake_openai.chat_requests) == 3  # straight to the form that worked
    assert fake_openai.last_chat.json["response_format"] == {"type": "json_object", "schema": SCHEMA}


async def test_a_server_refusing_every_schema_form_says_so_once_and_is_not_asked_again(
        fake_openai: FakeLLMServer) -> None:
    from agent.llm.base import ConstraintsUnsupported

    fake_openai.schema_forms = set()
    backend = OpenAICompatBackend(fake_openai.openai_url)
    with pytest.raises(ConstraintsUnsupported, match="does not take a JSON schema") as err:
        await collect(backend.stream_complete(HI, model="m", format=SCHEMA))
    assert "HTTP 500" in str(err.value)
    assert len(fake_openai.chat_requests) == 2 and backend.format_support is False
    with pytest.raises(ConstraintsUnsupported, match="refused before"):
        await backend.complete(HI, model="m", format=SCHEMA)
    assert len(fake_openai.chat_requests) == 2
    fake_openai.script(text="plain")  # requests without a schema are unaffected
    assert (await backend.complete(HI, model="m")).text == "plain"
