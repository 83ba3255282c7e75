"""The fault suite's live Navi: the real `manage.py start` (plus worker and beat in scale-out) on a
data directory that survives restarts, its model the fake Ollama server, and one user tool with a
side effect that can be counted (``mark_and_wait``: appends a line to side_effects.log, then waits)."""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import LiveNavi, start_live_navi
from tests.transport.wsclient import Client

MARK_TOOL = '''
import asyncio
from pathlib import Path

name = "mark_and_wait"
description = "Write a mark into the side-effect log, then wait a while."
parameters = {"type": "object", "properties": {"label": {"type": "string"}}}

async def execute(params: dict) -> str:
    with open(Path(__file__).with_name("side_effects.log"), "a") as fh:
        fh.write(str(params.get("label", "mark")) + "\\n")
    await asyncio.sleep(float(params.get("seconds", 20)))
    return "marked"
'''


@dataclass
class Stack:
    navi: LiveNavi
    tmp: Path
    data: Path

    def side_effects(self) -> list[str]:
        log = self.data / "tools" / "side_effects.log"
        return log.read_text().splitlines() if log.exists() else []

    def session(self, title: str = "fault") -> str:
        status, out = self.navi.request("POST", "/sessions", {"title": title})
        assert status == 201, out
        return str(out["session_id"])

    def messages(self, sid: str) -> list[dict[str, Any]]:
        status, out = self.navi.request("GET", f"/sessions/{sid}")
        assert status == 200, out
        return list(out["messages"])

    async def idle_socket(self, sid: str) -> Client:
        ws = await Client.open(self.navi.ws_url(sid))
        assert await ws.recv() == {"type": "session_sync"}
        return ws


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, fake_llm_server: Any) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("faults")
    data = tmp / "data"
    (data / "tools").mkdir(parents=True)
    (data / "tools" / "mark_and_wait.py").write_text(MARK_TOOL)
    (data / "tools" / "enabled.json").write_text(json.dumps(["mark_and_wait"]))
    navi = start_live_navi(tmp, {"OLLAMA_HOST": fake_llm_server.url, "OPENAI_BASE_URL": fake_llm_server.url + "/v1"})
    yield Stack(navi=navi, tmp=tmp, data=data)
    navi.stop()


@dataclass(frozen=True)
class Streamed:
    text: str
    seconds: float  # from the first delta to the last

    @property
    def chars_per_second(self) -> float:
        return len(self.text) / max(self.seconds, 0.001)


async def collect_text(ws: Client, *, at_least: int, streamed_for: float, timeout: float = 20) -> Streamed:
    """Read stream_delta events until ``at_least`` characters arrived over at least ``streamed_for``
    seconds since the first one."""
    text, first = "", 0.0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = await ws.recv(deadline - time.monotonic())
        if event["type"] == "stream_delta":
            first = first or time.monotonic()
            text += event["delta"]
            if len(text) >= at_least and time.monotonic() - first >= streamed_for:
                return Streamed(text=text, seconds=time.monotonic() - first)
        elif event["type"] in ("stream_end", "error", "session_sync"):
            raise AssertionError(f"the turn ended before the fault ({event})")
    raise AssertionError(f"only {len(text)} characters streamed in {timeout} s")


async def wait_for_event(ws: Client, kind: str, timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        event = await asyncio.wait_for(ws.recv(deadline - time.monotonic()), timeout)
        if event["type"] == kind:
            return event
