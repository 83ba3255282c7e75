"""Transport benchmark (a) + (d): one session, the fake model streaming N tokens, a real
WebSocket client in a separate process.

    .venv/bin/python bench/transport.py [--tier embedded|scaleout] [--tokens 3000]

Prints tokens/s delivered, p50/p99 latency from the model server writing a token to the
client receiving it (same host clock), and bytes on the wire per byte of text, at full
speed and paced at 300 tokens/s. (b) and (c) are not implemented yet.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TOKEN = "tok "  # 4 characters per token


class PacedModel:
    """A minimal Ollama: the planner gets "DIRECT", a streamed chat gets N tokens at a pace,
    and the send time of every token is recorded."""

    def __init__(self) -> None:
        self.tokens = 0
        self.rate = 0.0
        self.sent: list[float] = []
        self.port = 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(5)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0)
        body = json.loads(await reader.readexactly(length)) if length else {}
        path = head.split(b" ")[1].decode()
        if path == "/api/show":
            await self._json(writer, {"capabilities": ["completion", "tools"]})
        elif path == "/api/chat" and body.get("stream") is False:
            await self._json(writer, {"message": {"role": "assistant", "content": "DIRECT"}, "done": True,
                                      "done_reason": "stop"})
        elif path == "/api/chat":
            await self._stream(writer)
        else:
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    async def _json(self, writer: asyncio.StreamWriter, payload: Any) -> None:
        data = json.dumps(payload).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (len(data), data))

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n"
                     b"Connection: close\r\n\r\n")
        self.sent = []
        start = time.perf_counter()
        for i in range(self.tokens):
            if self.rate:
                delay = start + i / self.rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            line = json.dumps({"message": {"role": "assistant", "content": TOKEN}, "done": False}).encode() + b"\n"
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.sent.append(time.time())
            await writer.drain()
        done = json.dumps({"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                           "prompt_eval_count": 10, "eval_count": self.tokens}).encode() + b"\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))


def client(url: str, out: Any) -> None:
    """Separate process: send the message, record (receive time, chars so far, frame bytes)."""
    from websockets.sync.client import connect

    with connect(url, max_size=None) as ws:
        assert json.loads(ws.recv())["type"] == "session_sync"
        ws.send(json.dumps({"type": "message", "content": "Stream tokens for the benchmark please"}))
        received: list[tuple[float, int]] = []
        chars = wire = 0
        while True:
            raw = ws.recv()
            now = time.time()
            wire += len(raw.encode()) + (2 if len(raw) < 126 else 4)  # + WebSocket frame header
            event = json.loads(raw)
            if event["type"] == "stream_delta":
                chars += len(event["delta"])
                received.append((now, chars))
            if event["type"] == "session_sync":
                break
        out.put({"received": received, "wire": wire, "chars": chars})


def measure(live: Any, model: PacedModel, tokens: int, rate: float) -> dict[str, float]:
    model.tokens, model.rate = tokens, rate
    status, body = live.request("POST", "/sessions", {"title": "bench"})
    queue: Any = mp.Queue()
    proc = mp.Process(target=client, args=(live.ws_url(body["session_id"]), queue))
    proc.start()
    result = queue.get(timeout=300)
    proc.join(10)
    received, sent = result["received"], model.sent
    latencies: list[float] = []
    j = 0
    for i, t_sent in enumerate(sent):  # token i is complete once (i + 1) * 4 characters arrived
        need = (i + 1) * len(TOKEN)
        while j < len(received) and received[j][1] < need:
            j += 1
        if j < len(received):
            latencies.append((received[j][0] - t_sent) * 1000)
    span = received[-1][0] - sent[0]
    q = statistics.quantiles(latencies, n=100)
    return {"tokens": tokens, "tokens_per_s": tokens / span, "p50_ms": q[49], "p99_ms": q[98],
            "wire_per_text_byte": result["wire"] / result["chars"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tier", default=os.environ.get("NAVI_TEST_TIER", "embedded"))
    parser.add_argument("--tokens", type=int, default=3000)
    args = parser.parse_args()
    from tests.support.live import start_live_navi

    model = PacedModel()
    live = start_live_navi(Path(tempfile.mkdtemp(prefix="navi-bench-")),
                           {"OLLAMA_HOST": f"http://127.0.0.1:{model.port}", "LOG_LEVEL": "ERROR"}, tier=args.tier)
    try:
        print(f"tier={args.tier} WS_DELTA_COALESCE_MS=30 token={TOKEN!r}")
        for label, rate in (("full speed", 0.0), ("paced 300 tok/s", 300.0)):
            r = measure(live, model, args.tokens if not rate else 1500, rate)
            print(f"(a) {label:16s} tokens={r['tokens']:5d}  delivered={r['tokens_per_s']:8.0f} tok/s  "
                  f"p50={r['p50_ms']:6.1f} ms  p99={r['p99_ms']:6.1f} ms   "
                  f"(d) wire/text = {r['wire_per_text_byte']:.2f}x")
    finally:
        live.stop()


if __name__ == "__main__":
    main()
