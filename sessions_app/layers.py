"""The embedded channel layer: Channels' in-memory layer with a group_send that scales.

The stock ``InMemoryChannelLayer.group_send`` scans *every* channel queue and group for
expired messages on every send (O(channels + groups)) and spawns one task per group member
plus an ``as_completed`` loop. With 100 sessions streaming at 50 tokens/s that scan ran
5 000 times a second and was the largest single cost on the server's event loop. Here the
expiry sweep runs at most once a second (messages expire after 60 s, groups after a day)
and members get the message by a direct ``send`` — the in-memory ``send`` never blocks (it
raises ChannelFull instead), so the result is the same: every member that is not full gets
the message, in order.

Per message the stock layer also deep-copies the message for every member and builds a new
``asyncio.Queue`` twice (``setdefault`` in ``send`` and ``receive``; ``receive`` drops the
queue whenever it runs empty, which for a consumer that keeps up is after every message).
Here a channel's queue lives as long as the channel is in use (the sweep removes empty
queues nobody waits on), and ``group_send`` hands every member the same message: the only
group messages are ``session.event`` envelopes (``sessions_app.bus``) whose event dicts are
never changed once published (the same dicts sit in the run's replay log).
"""
from __future__ import annotations

import asyncio
import time
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

CLEAN_INTERVAL_S = 1.0


class NaviInMemoryChannelLayer(InMemoryChannelLayer):
    _next_clean = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now < self._next_clean:
            return
        self._next_clean = now + CLEAN_INTERVAL_S
        super()._clean_expired()
        for channel, queue in list(self.channels.items()):
            if queue.empty() and not getattr(queue, "_getters", None):  # no message, nobody receiving
                del self.channels[channel]

    def _queue(self, channel: str) -> asyncio.Queue[Any]:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        return queue

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._put(channel, deepcopy(message))

    def _put(self, channel: str, message: dict[str, Any]) -> None:
        try:
            self._queue(channel).put_nowait((time.time() + self.expiry, message))
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def receive(self, channel: str) -> dict[str, Any]:
        self.require_valid_channel_name(channel)
        self._clean_expired()
        _, message = await self._queue(channel).get()
        return message  # type: ignore[no-any-return]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            try:
                self._put(channel, message)  # shared by the members: see the module docstring
            except ChannelFull:
                pass
