"""Redis commands of one event loop, pipelined: while a round trip is in flight, the next
commands queue up and go out together in the next one.

In scale-out mode every event of every turn is a Redis write (the run's log and the PUBLISH
to the session's group). Sent one at a time, each costs a round trip, a socket write and read,
and a wake-up of the server's loop; with 100 sessions streaming that is thousands a second.
Here one task sends whatever has queued in one pipeline (no MULTI) and hands every caller its
own reply or error. One task and one connection keep the order in which ``call`` was made,
which is what a session's single writer needs (it awaits each write before the next).
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from redis import asyncio as aioredis


class CommandBatcher:
    """Pipelines the commands of one event loop to one Redis (see the module docstring)."""

    def __init__(self, connect: Callable[[], aioredis.Redis], *,
                 close: Callable[[aioredis.Redis], Awaitable[None]] | None = None) -> None:
        """``connect`` makes the client on first use (on the loop); ``close`` closes it in ``close``
        (None: the client is someone else's and stays open)."""
        self._connect = connect
        self._close = close
        self.redis: aioredis.Redis | None = None
        self.queue: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []
        self.task: asyncio.Task[None] | None = None

    async def call(self, *command: Any) -> Any:
        """Send a command and wait for its reply; a Redis error is raised here. The command goes
        out in call order even if the caller is cancelled meanwhile."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        self.queue.append((command, done))
        if self.task is None:
            self.task = loop.create_task(self._send_batches())
        return await done

    async def _send_batches(self) -> None:
        try:
            while self.queue:
                batch, self.queue = self.queue, []
                try:
                    if self.redis is None:
                        self.redis = self._connect()
                    pipe = self.redis.pipeline(transaction=False)
                    for command, _ in batch:
                        pipe.execute_command(*command)
                    replies: list[Any] = await pipe.execute(raise_on_error=False)
                except Exception as exc:  # the connection: every command of the batch failed
                    replies = [exc] * len(batch)
                for (_, done), reply in zip(batch, replies, strict=True):
                    if done.done():  # its caller was cancelled
                        continue
                    if isinstance(reply, Exception):
                        done.set_exception(reply)
                    else:
                        done.set_result(reply)
        finally:
            self.task = None

    async def close(self) -> None:
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)
        if self.redis is not None and self._close is not None:
            await self._close(self.redis)
        self.redis = None
