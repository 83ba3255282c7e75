"""The stream guard: stop polling during prefill, timeouts, and closing the HTTP connection."""
# ruff: noqa: F811  (the fixture import below is re-bound by each test's parameter)
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from agent.llm.base import ChatMessage, LLMError, StreamChunk, StreamTimeout
from agent.llm.ollama import OllamaBackend
from agent.stream_guard import iter_stream_guarded
from tests.fakes.fake_llm import FakeLLMServer
from tests.fakes.fixtures import fake_ollama  # noqa: F401

HI = [ChatMessage(role="user", content="hi")]


def guarded(
    gen: AsyncIterator[StreamChunk], stop: asyncio.Event | None = None, first: float = 2.0, between: float = 2.0
) -> AsyncIterator[StreamChunk]:
    return iter_stream_guarded(gen, stop_event=stop, first_chunk_timeout=first, chunk_timeout=between,
                               poll_interval=0.1)


async def test_passes_chunks_through(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(thinking="hm", text="hello world")
    gen = OllamaBackend(fake_ollama.url).stream_complete(HI, model="m", think=True)
    chunks = [c async for c in guarded(gen, asyncio.Event())]
    assert "".join(c.text for c in chunks if c.kind == "text") == "hello world"
    assert chunks[-1].kind == "done"
    assert await fake_ollama.wait_for(lambda f: f.completed_streams == 1)


async def test_stop_during_silent_prefill(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="too late", hang_before_first_chunk=30)
    stop = asyncio.Event()
    gen = OllamaBackend(fake_ollama.url).stream_complete(HI, model="m")
    asyncio.get_running_loop().call_later(0.3, stop.set)
    started = time.monotonic()
    chunks = [c async for c in guarded(gen, stop, first=60)]
    assert chunks == []
    assert time.monotonic() - started < 1.5
    assert await fake_ollama.wait_for(lambda f: f.closed_by_client == 1 and f.open_streams == 0)


async def test_stop_between_chunks(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="abcdefghij" * 5, token_size=1, delay_between_chunks=0.02)
    stop = asyncio.Event()
    seen = []
    async for chunk in guarded(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m"), stop):
        seen.append(chunk)
        if len(seen) == 3:
            stop.set()
    assert len(seen) == 3
    assert await fake_ollama.wait_for(lambda f: f.closed_by_client == 1)


async def test_first_chunk_timeout(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="never", hang_before_first_chunk=30)
    gen = OllamaBackend(fake_ollama.url).stream_complete(HI, model="m")
    started = time.monotonic()
    with pytest.raises(StreamTimeout) as err:
        [c async for c in guarded(gen, asyncio.Event(), first=0.5)]
    assert 0.4 < time.monotonic() - started < 1.5
    assert "sent nothing for 0.5 s (LLM_STREAM_FIRST_CHUNK_TIMEOUT)" in str(err.value)
    assert await fake_ollama.wait_for(lambda f: f.closed_by_client == 1)


async def test_chunk_timeout(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="start then stall", stall_after_chunks=2, stall_seconds=30)
    gen = OllamaBackend(fake_ollama.url).stream_complete(HI, model="m")
    seen = []
    with pytest.raises(StreamTimeout, match="LLM_STREAM_CHUNK_TIMEOUT"):
        async for chunk in guarded(gen, None, first=5, between=0.3):
            seen.append(chunk.text)
    assert "".join(seen) == "start then"
    assert await fake_ollama.wait_for(lambda f: f.closed_by_client == 1)


async def test_consumer_closing_early_closes_connection(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="x" * 100, token_size=1, delay_between_chunks=0.01)
    guard = guarded(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m"), asyncio.Event())
    first = await guard.__anext__()  # type: ignore[attr-defined]
    assert first.text == "x"
    await guard.aclose()  # type: ignore[attr-defined]
    assert await fake_ollama.wait_for(lambda f: f.closed_by_client == 1 and f.open_streams == 0)


async def test_errors_propagate_and_close(fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script(text="cut off here", drop_after_chunks=1)
    with pytest.raises(LLMError, match="broke off"):
        [c async for c in guarded(OllamaBackend(fake_ollama.url).stream_complete(HI, model="m"))]


class _Recorder:
    """A plain async generator that records whether it was closed."""

    def __init__(self, delays: list[float]) -> None:
        self.delays = delays
        self.closed = False

    async def gen(self) -> AsyncIterator[StreamChunk]:
        try:
            for delay in self.delays:
                await asyncio.sleep(delay)
                yield StreamChunk(kind="text", text="x")
        finally:
            self.closed = True


async def test_normal_end_closes_generator() -> None:
    rec = _Recorder([0, 0])
    assert len([c async for c in guarded(rec.gen())]) == 2
    assert rec.closed


async def test_stop_already_set_never_reads() -> None:
    rec = _Recorder([0])
    stop = asyncio.Event()
    stop.set()
    assert [c async for c in guarded(rec.gen(), stop)] == []
    assert not rec.closed  # never started: aclose on an unstarted generator runs no finally


async def test_timeout_cancels_pending_read() -> None:
    rec = _Recorder([10])
    with pytest.raises(StreamTimeout):
        [c async for c in guarded(rec.gen(), None, first=0.2)]
    assert rec.closed


async def test_stop_ends_the_wait_at_once_whatever_the_poll_interval() -> None:
    rec = _Recorder([30])
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, stop.set)
    started = time.monotonic()
    chunks = [c async for c in iter_stream_guarded(rec.gen(), stop_event=stop, first_chunk_timeout=60,
                                                   chunk_timeout=60, poll_interval=10)]
    assert chunks == []
    assert time.monotonic() - started < 0.5
    assert rec.closed


async def test_chunk_timeout_without_stop_event_after_a_slow_consumer() -> None:
    rec = _Recorder([0, 0, 10])
    seen = []
    started = time.monotonic()
    with pytest.raises(StreamTimeout, match="LLM_STREAM_CHUNK_TIMEOUT"):
        async for chunk in guarded(rec.gen(), None, first=5, between=0.2):
            seen.append(chunk)
            await asyncio.sleep(0.3)  # the consumer's own time is not the model's silence
    assert len(seen) == 2
    assert 0.7 < time.monotonic() - started < 1.5
    assert rec.closed


async def test_one_watcher_task_per_stream_not_one_per_chunk() -> None:
    rec = _Recorder([0.001] * 50)
    before = len(asyncio.all_tasks())
    most = 0
    async for _ in guarded(rec.gen(), asyncio.Event()):
        most = max(most, len(asyncio.all_tasks()) - before)
    assert most == 1


async def test_a_cancel_from_outside_still_cancels_the_consumer() -> None:
    rec = _Recorder([30])

    async def consume() -> list[StreamChunk]:
        return [c async for c in guarded(rec.gen(), asyncio.Event(), first=60)]

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rec.closed
    await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if t.get_name() == "navi-stream-watch"] == []
