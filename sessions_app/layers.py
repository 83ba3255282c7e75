"""The channel layers: Channels' in-memory layer with a group_send that scales (embedded), and
channels_redis' pub/sub layer with a pipelined group_send (scale-out, at the end).

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
import functools
import time
from collections.abc import Callable
from copy import deepcopy
from typing import Any

import structlog
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer, RedisSingleShardConnection
from channels_redis.utils import _close_redis, _consistent_hash, _wrap_close, create_pool
from redis import asyncio as aioredis

from sessions_app.redis_batch import CommandBatcher

log = structlog.get_logger(__name__)

CLEAN_INTERVAL_S = 1.0


class _Attachable:
    """``attach``: a consumer takes its group messages directly (both layers below)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.direct: dict[str, Callable[[dict[str, Any]], bool]] = {}

    def attach(self, channel: str, deliver: Callable[[dict[str, Any]], bool]) -> None:
        """Hand ``channel``'s group messages (those this process receives) to ``deliver`` while
        its queue is empty.

        ``deliver`` returns False to have the message queued instead (its consumer is busy with
        something else). A live event then reaches the client within the publisher's (or the
        pub/sub reader's) own step: no queue, no task wake-up, no dispatch per event and
        subscriber (~10 % of the loop with 100 sessions streaming). A queued backlog is always
        drained first: order is kept."""
        self.direct[channel] = deliver

    def detach(self, channel: str) -> None:
        self.direct.pop(channel, None)


class NaviInMemoryChannelLayer(_Attachable, InMemoryChannelLayer):
    """See the module docstring; ``attach`` lets a consumer take group messages directly."""

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
        self.group_send_now(group, message)

    def group_send_now(self, group: str, message: dict[str, Any]) -> None:
        """``group_send`` without a coroutine: it never waits (``sessions_app.bus.publish_now``)."""
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            deliver = self.direct.get(channel)
            if deliver is not None:
                queue = self.channels.get(channel)
                if (queue is None or queue.empty()) and deliver(message):
                    continue
            try:
                self._put(channel, message)  # shared by the members: see the module docstring
            except ChannelFull:
                pass


# -- scale-out --------------------------------------------------------------------------------


class _Shard(RedisSingleShardConnection):  # type: ignore[misc]
    """The stock shard connection; a group message for an attached consumer whose queue is
    empty goes to it directly (``NaviRedisPubSubChannelLayer.attach``), decoded once for all
    of this process's members instead of once per member after a queue hop."""

    def _receive_message(self, message: Any) -> None:
        layer = self.channel_layer
        direct = getattr(layer.channel_layer, "direct", None)
        name = message["channel"] if message is not None else None
        if isinstance(name, bytes):
            name = name.decode()
        members = layer.groups.get(name) if direct and name not in layer.channels else None
        if members is None:
            super()._receive_message(message)
            return
        data = message["data"]
        decoded: dict[str, Any] | None = None
        for channel in members:
            queue = layer.channels.get(channel)
            if queue is None:
                continue
            deliver = direct.get(channel)
            if deliver is not None and queue.empty():
                try:
                    if decoded is None:
                        decoded = layer.channel_layer.deserialize(data)
                    if deliver(decoded):
                        continue
                except Exception:  # the member's own receive meets it, as without the direct path
                    log.exception("layer_direct_delivery_failed", channel=channel)
            queue.put_nowait(data)


class _PubSubLoopLayer(RedisPubSubLoopLayer):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shards = [_Shard(shard.host, self) for shard in self._shards]  # not connected yet
        # channels_redis sends each PUBLISH under a per-process lock and waits for its reply before
        # the next: with the server's loop busy, about one message per loop turn for the whole
        # process (20 sessions x 50 events/s fell seconds behind). Pipelined instead (redis_batch).
        self.publishers = [CommandBatcher(functools.partial(_connect, shard.host), close=_close_redis)
                           for shard in self._shards]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        channel = self._get_group_channel_name(group)
        publisher = self.publishers[_consistent_hash(channel, len(self.publishers))]
        await publisher.call("PUBLISH", channel, self.channel_layer.serialize(message))

    async def flush(self) -> None:
        for publisher in self.publishers:
            await publisher.close()
        await super().flush()


def _connect(host: dict[str, Any]) -> aioredis.Redis:
    return aioredis.Redis(connection_pool=create_pool(host))


class NaviRedisPubSubChannelLayer(_Attachable, RedisPubSubChannelLayer):  # type: ignore[misc]
    """channels_redis' pub/sub layer (scale-out) with a pipelined ``group_send``.

    Subscriptions, receive and channel sends are the stock layer's. Like it, this keeps nothing
    for a subscriber that is not connected at the moment of a PUBLISH; the session consumer fills
    such gaps from the run's replay log (sessions_app/consumers.py)."""

    def _get_layer(self) -> _PubSubLoopLayer:
        loop = asyncio.get_running_loop()
        layer: _PubSubLoopLayer | None = self._layers.get(loop)
        if layer is None:  # the stock method, with our loop layer
            layer = self._layers[loop] = _PubSubLoopLayer(*self._args, **self._kwargs, channel_layer=self)
            _wrap_close(self, loop)
        return layer

    def publication(self, group: str, message: dict[str, Any], *, redis_url: str) -> tuple[str, bytes] | None:
        """(channel, payload) of the one PUBLISH ``group_send`` makes for this message, when it
        would go to the Redis at ``redis_url``, so that the caller can send it inside another
        command there (the run writer logs and publishes an event in one script); None with
        another Redis or several shards. Call on the loop that would send it."""
        layer = self._get_layer()
        if len(layer._shards) != 1 or layer._shards[0].host.get("address") != redis_url:
            return None
        return layer._get_group_channel_name(group), self.serialize(message)
