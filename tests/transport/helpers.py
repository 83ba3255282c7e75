"""Helpers of the transport tests: scripted turn functions and WebSocket clients."""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from agent.events import Error, StreamDelta, StreamEnd, StreamStopped, ThinkingDelta, ThinkingEnd
from navi_site.asgi import application
from sessions_app import services
from tests.support.users import make_user, token_for

HOST = [(b"host", b"testserver")]


@sync_to_async
def make_session(username: str = "alice", *, staff: bool = True, title: str = "t") -> tuple[str, str, int]:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(username=username).first() or make_user(username, staff=staff)
    session = services.session_create(owner=user, title=title)
    return str(session.id), token_for(user), user.pk


async def connect(sid: str, token: str, **query: Any) -> WebsocketCommunicator:
    qs = "&".join(f"{k}={v}" for k, v in {"token": token, **query}.items())
    comm = WebsocketCommunicator(application, f"/ws/sessions/{sid}?{qs}", headers=HOST)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    return comm


async def receive_until(comm: WebsocketCommunicator, kind: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    """Every event up to and including the first of type ``kind`` (heartbeats skipped)."""
    out: list[dict[str, Any]] = []
    while True:
        event = await comm.receive_json_from(timeout=timeout)
        if event["type"] == "heartbeat":
            continue
        out.append(event)
        if event["type"] == kind:
            return out


async def drain(comm: WebsocketCommunicator, quiet: float = 0.2) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while not await comm.receive_nothing(timeout=quiet):
        out.append(json.loads((await comm.receive_output())["text"]))
    return out


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


TurnFn = Callable[..., AsyncIterator[Any]]


def scripted(*events: Any, gate: asyncio.Event | None = None, gate_after: int = 0) -> TurnFn:
    """A turn function yielding ``events``; with ``gate``, it waits for it after ``gate_after`` events.
    It honours stop like the agent: a set stop event ends the turn with StreamStopped."""

    async def turn(session_id: str, text: str, **kw: Any) -> AsyncIterator[Any]:
        stop: asyncio.Event = kw["stop_event"]
        for n, event in enumerate(events):
            if gate is not None and n == gate_after:
                waiter = asyncio.ensure_future(gate.wait())
                stopper = asyncio.ensure_future(stop.wait())
                await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                stopper.cancel()
            if stop.is_set():
                yield StreamStopped()
                return
            yield event

    return turn


def simple_answer(text: str = "Hello there, friend.", thinking: str = "hmm, let me see") -> list[Any]:
    deltas: list[Any] = [ThinkingDelta(delta=thinking[i : i + 3]) for i in range(0, len(thinking), 3)]
    deltas.append(ThinkingEnd())
    deltas += [StreamDelta(delta=text[i : i + 4]) for i in range(0, len(text), 4)]
    deltas.append(StreamEnd(content=text, context_tokens=10, max_context_tokens=100))
    return deltas


__all__ = ["Error", "HOST", "connect", "drain", "make_session", "receive_until", "scripted", "simple_answer", "types"]
