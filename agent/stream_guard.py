"""The streaming guard wrapper (spec 001 "Streaming guard wrapper").

Ollama sends nothing while it prefills a long prompt, so a plain ``await`` on
the first chunk can block for minutes and the user's Stop would not be seen.
The guard enforces the first-chunk and between-chunk timeouts and ends the
wait as soon as the stop event is set. Whatever ends the stream (stop, timeout,
error, the end of the answer, or the consumer closing the guarded generator),
the underlying generator is closed with ``aclose()`` so the HTTP connection to
the model server really ends and the GPU goes idle.

The chunks are read directly in the consumer's task; one watcher task per stream
sleeps until the current read's deadline or the stop event, and only then
interrupts the read (by cancelling the reading task, like ``asyncio.timeout``,
and taking the cancellation back). An earlier version started a task per chunk
and waited on it in slices: with 100 streams at 50 tokens/s that was 5 000 task
starts and waits a second on the server's event loop.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import structlog

from agent.llm.base import StreamChunk, StreamTimeout

log = structlog.get_logger(__name__)


async def iter_stream_guarded(
    gen: AsyncIterator[StreamChunk],
    *,
    stop_event: asyncio.Event | None,
    first_chunk_timeout: float,
    chunk_timeout: float,
    poll_interval: float = 1.0,
) -> AsyncIterator[StreamChunk]:
    """Yield the chunks of ``gen`` under the stop event and timeouts.

    On stop it simply returns (the caller checks ``stop_event`` and emits
    ``stream_stopped``). Raises StreamTimeout when the model is silent too long;
    errors of ``gen`` propagate unchanged. ``poll_interval`` is kept for callers:
    the stop event is now watched directly, so a stop ends the wait at once.
    """
    watch = _Watch(stop_event, shortest=min(first_chunk_timeout, chunk_timeout))
    first = True
    try:
        while not _stopped(stop_event):
            limit = first_chunk_timeout if first else chunk_timeout
            try:
                chunk = await watch.read(gen, limit)
            except StopAsyncIteration:
                return
            except _Interrupted as why:
                if why.stop:
                    log.info("llm_stream_stopped", waiting_for_first_chunk=first)
                    return
                raise StreamTimeout(_timeout_message(first, limit)) from None
            first = False
            yield chunk
    finally:
        watch.close()
        await _aclose(gen)


class _Interrupted(Exception):
    def __init__(self, *, stop: bool) -> None:
        super().__init__("stop" if stop else "timeout")
        self.stop = stop


class _Watch:
    """The one watcher task of a stream and the read it guards.

    ``read`` marks the reading task and its deadline; the watcher cancels that task
    only while it is suspended inside the read, so the CancelledError is raised
    there and nowhere else, and ``read`` takes it back (``uncancel``) unless someone
    else cancelled the task too.
    """

    def __init__(self, stop_event: asyncio.Event | None, *, shortest: float) -> None:
        self.stop_event = stop_event
        self.shortest = max(shortest, 0.01)  # a read started later cannot end before now + shortest
        self.reader: asyncio.Task[object] | None = None  # set only while a read is pending
        self.deadline = 0.0
        self.fired: str | None = None  # "stop" or "timeout" once the watcher interrupted a read
        self.task: asyncio.Task[None] | None = None

    async def read(self, gen: AsyncIterator[StreamChunk], limit: float) -> StreamChunk:
        loop = asyncio.get_running_loop()
        reader = asyncio.current_task()
        assert reader is not None
        self.deadline = loop.time() + limit
        if self.task is None:
            self.task = loop.create_task(self._run(), name="navi-stream-watch")
        cancelling = reader.cancelling()
        self.reader = reader
        try:
            chunk = await gen.__anext__()
        except asyncio.CancelledError:
            if self.fired is not None and reader.uncancel() <= cancelling:
                raise _Interrupted(stop=self.fired == "stop") from None
            raise
        finally:
            self.reader = None
        if self.fired is not None:  # the generator swallowed the cancellation: still interrupted
            reader.uncancel()
            raise _Interrupted(stop=self.fired == "stop")
        return chunk

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if self.reader is not None and now >= self.deadline:
                self._fire("timeout")
                return
            # Wake at the pending read's deadline at the latest; a read that starts while the
            # watcher sleeps has a deadline of at least its start + ``shortest``.
            wake = now + self.shortest
            if self.reader is not None:
                wake = min(wake, self.deadline)
            if self.stop_event is None:
                await asyncio.sleep(max(0.0, wake - now))
                continue
            try:
                async with asyncio.timeout_at(wake):
                    await self.stop_event.wait()
            except TimeoutError:
                continue
            if self.reader is not None:
                self._fire("stop")
            return  # stopped: the guard's loop sees the event before its next read

    def _fire(self, why: str) -> None:
        assert self.reader is not None
        self.fired = why
        self.reader.cancel()

    def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()


def _stopped(stop_event: asyncio.Event | None) -> bool:
    return stop_event is not None and stop_event.is_set()


def _timeout_message(first: bool, limit: float) -> str:
    if first:
        return (
            f"the model sent nothing for {limit:g} s (LLM_STREAM_FIRST_CHUNK_TIMEOUT) — it may still be loading"
            " or the prompt may be too long for this machine; the request was cancelled. Try again, use a"
            " smaller model, or raise LLM_STREAM_FIRST_CHUNK_TIMEOUT."
        )
    return (
        f"the model stopped sending for {limit:g} s in the middle of its answer (LLM_STREAM_CHUNK_TIMEOUT);"
        " the request was cancelled. The model server may be overloaded — try again or raise"
        " LLM_STREAM_CHUNK_TIMEOUT."
    )


async def _aclose(gen: AsyncIterator[StreamChunk]) -> None:
    aclose = getattr(gen, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except (Exception, asyncio.CancelledError) as exc:  # closing must not mask the real outcome
        if isinstance(exc, asyncio.CancelledError) and _current_task_cancelling():
            raise
        log.warning("llm_stream_close_failed", error=repr(exc))


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return bool(task is not None and task.cancelling())
