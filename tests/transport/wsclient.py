"""A real WebSocket client (the `websockets` library) for the live-server tests."""
from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from websockets.asyncio.client import ClientConnection, connect


class Client:
    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self.heartbeats = 0

    @classmethod
    async def open(cls, url: str, **kw: Any) -> Client:
        return cls(await connect(url, max_size=64 * 1024 * 1024, max_queue=None, open_timeout=10, close_timeout=2, **kw))

    async def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next event other than a heartbeat, within ``timeout`` seconds in all: heartbeats keep
        a socket alive but must not keep a waiting test alive past its bound."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            event = json.loads(await asyncio.wait_for(self.conn.recv(), max(left, 0)))
            if event["type"] != "heartbeat":
                return event  # type: ignore[no-any-return]
            self.heartbeats += 1

    async def until(self, kind: str, timeout: float = 15.0) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            out.append(await self.recv(timeout))
            if out[-1]["type"] == kind:
                return out

    async def quiet(self, seconds: float = 0.4) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        try:
            while True:
                out.append(await self.recv(seconds))
        except TimeoutError:
            return out

    async def send(self, payload: Any) -> None:
        await self.conn.send(payload if isinstance(payload, str | bytes) else json.dumps(payload))

    async def close(self) -> None:
        await self.conn.close()


def multipart(field: str, filename: str, data: bytes, content_type: str = "application/octet-stream") -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\n"
        f"Content-Type: {content_type}\r\n\r\n"
    ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]
