"""The streaming guard wrapper (spec 001 "Streaming guard wrapper").

Ollama sends nothing while it prefills a long prompt, so a plain ``await`` on
the first chunk can block for minutes and the user's Stop would not be seen.
The guard waits for the next chunk in slices of ``poll_interval`` seconds,
checking the stop event between slices, and enforces the first-chunk and
between-chunk timeouts. Whatever ends the stream (stop, timeout, error, the
end of the answer, or the consumer closing the guarded generator), the
underlying generator is closed with ``aclose()`` so the HTTP connection to the
model server really ends and the GPU goes idle.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import structlog

from agent.llm.base import StreamChunk, StreamTimeout

log = structlog.get_logger(__name__)

# How long to wait for a cancelled read to unwind before closing the generator anyway.
CANCEL_GRACE = 5.0


async def iter_stream_guarded(
    gen: AsyncIterator[StreamChunk],
    *,
    stop_event: asyncio.Event | None,
    first_chunk_timeout: float,
    chunk_timeout: float,
    poll_interval: float = 1.0,
) -> AsyncIterator[StreamChunk]:
    """Yield the chunks of ``gen`` under stop polling and timeouts.

    On stop it simply returns (the caller checks ``stop_event`` and emits
    ``stream_stopped``). Raises StreamTimeout when the model is silent too long;
    errors of ``gen`` propagate unchanged.
    """
    pending: asyncio.Task[StreamChunk] | None = None
    first = True
    try:
        while not _stopped(stop_event):
            pending = asyncio.create_task(_next(gen))
            limit = first_chunk_timeout if first else chunk_timeout
            if not await _wait(pending, stop_event, limit, poll_interval):
                if _stopped(stop_event):
                    log.info("llm_stream_stopped", waiting_for_first_chunk=first)
                    return
                raise StreamTimeout(_timeout_message(first, limit))
            task, pending = pending, None
            try:
                chunk = task.result()
            except StopAsyncIteration:
                return
            first = False
            yield chunk
    finally:
        await _cancel(pending)
        await _aclose(gen)


async def _next(gen: AsyncIterator[StreamChunk]) -> StreamChunk:
    return await gen.__anext__()


async def _wait(task: asyncio.Task[Any], stop_event: asyncio.Event | None, limit: float, poll: float) -> bool:
    """True once ``task`` is done; False on stop or when ``limit`` seconds passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        done, _ = await asyncio.wait({task}, timeout=min(poll, remaining))
        if done:
            return True
        if _stopped(stop_event):
            return False


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


async def _cancel(task: asyncio.Task[Any] | None) -> None:
    """Cancel a pending read and let it unwind (the generator's own finally closes the response)."""
    if task is None or task.done():
        if task is not None and not task.cancelled():
            task.exception()  # retrieved: no "exception was never retrieved" warning
        return
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE)


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
