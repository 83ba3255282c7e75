"""Transport benchmark: the real `manage.py start`, a paced fake Ollama, real WebSocket clients
in separate processes.

    .venv/bin/python bench/transport.py [--tier embedded|scaleout] [--only a,b,c] [--coalesce-ms N]

(a) one session, the model streaming as fast as it can and paced at 300 tokens/s: tokens/s
    delivered, p50/p99 latency from the fake model writing a token to the client reading it;
(d) measured on the same runs: bytes on the wire (counted at the client's socket, WebSocket
    framing and permessage-deflate included) per byte of streamed text, with and without
    compression;
(b) 100 sessions streaming at 50 tokens/s each (every 4-character token carries its send time) plus a
    bystander doing GET /sessions 5 times a second: streaming p99 and bystander p99;
(c) 1 000 idle WebSocket connections held for 30 s (heartbeats included): server CPU and RSS
    from /proc.

Latencies use one host clock (time.time() in the model thread and in the client processes).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import re
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import percentile  # noqa: E402

PROMPT = "Stream tokens for the benchmark please"
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
WRAP = 62 ** 3  # ms: a 3-character stamp wraps every ~238 s


def stamp_token(now: float) -> str:
    """A 4-character token (like a real one) carrying its send time: 3 base-62 digits of the
    wall clock in ms (mod WRAP) and a space."""
    ms = int(now * 1000) % WRAP
    return B62[ms // 3844] + B62[ms // 62 % 62] + B62[ms % 62] + " "


def stamp_latency_ms(token: str, now: float) -> float:
    ms = B62.index(token[0]) * 3844 + B62.index(token[1]) * 62 + B62.index(token[2])
    return float((int(now * 1000) - ms) % WRAP)
CTX = mp.get_context("spawn")  # clean children: the parent runs the model server in a thread


def prose_tokens() -> list[str]:
    """English text split roughly like a BPE tokenizer (~4 characters a token): realistic to
    compress, unlike a repeated token. Taken from the tool manuals (manuals/*.md)."""
    text = " ".join(p.read_text(errors="replace") for p in sorted((ROOT / "manuals").glob("*.md")))
    text = re.sub(r"[^A-Za-z0-9 ,.;:'()\-]+", " ", text)
    text = re.sub(r" +", " ", text)
    return re.findall(r" ?[A-Za-z]{1,6}| ?[0-9]{1,3}| ?[^A-Za-z0-9 ]| ", text)


# -- the model -----------------------------------------------------------------------------


class PacedModel:
    """A minimal Ollama on a loopback socket: the planner gets "DIRECT"; a streamed chat gets
    ``count`` tokens at ``rate`` tokens/s (0 = as fast as it can). ``mode`` "prose" streams
    prose tokens and records each token's send time (one stream at a time); "stamp" makes every
    token carry its own send time (``stamp_token``) so that any number of concurrent streams
    can be measured."""

    def __init__(self) -> None:
        self.mode = "prose"
        self.count = 0
        self.rate = 0.0
        self.tokens: list[str] = prose_tokens()
        self.sent: list[float] = []
        self.port = 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True, name="paced-model").start()
        ready.wait(5)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=512))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                           if h.lower().startswith(b"content-length")), 0)
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
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _json(self, writer: asyncio.StreamWriter, payload: Any) -> None:
        data = json.dumps(payload).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (len(data), data))

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n"
                     b"Connection: close\r\n\r\n")
        mode, count, rate = self.mode, self.count, self.rate
        sent: list[float] = []
        if mode == "prose":
            self.sent = sent
        start = time.perf_counter()
        for i in range(count):
            if rate:
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            now = time.time()
            token = self.tokens[i % len(self.tokens)] if mode == "prose" else stamp_token(now)
            line = json.dumps({"message": {"role": "assistant", "content": token}, "done": False}).encode() + b"\n"
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            sent.append(now)
            await writer.drain()
        done = json.dumps({"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                           "prompt_eval_count": 10, "eval_count": count}).encode() + b"\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))


# -- (a) + (d): one client, bytes counted at the socket -------------------------------------


class CountingSocket(socket.socket):
    """A socket that keeps every byte it reads (the server's frames, exactly as sent)."""

    raw: bytearray

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        self.raw.extend(data)
        return data


def frame_sizes(raw: bytes) -> list[int]:
    """Wire size (header + payload) of each server frame after the HTTP handshake."""
    pos = raw.index(b"\r\n\r\n") + 4
    sizes: list[int] = []
    while pos + 2 <= len(raw):
        b1 = raw[pos + 1]
        length, head = b1 & 0x7F, 2
        if length == 126:
            length, head = int.from_bytes(raw[pos + 2:pos + 4], "big"), 4
        elif length == 127:
            length, head = int.from_bytes(raw[pos + 2:pos + 10], "big"), 10
        if b1 & 0x80:
            head += 4  # masked (never from a server)
        sizes.append(head + length)
        pos += head + length
    return sizes


def one_client(url: str, compression: bool, out: Any) -> None:
    """Separate process: send the message, record (receive time, chars so far), and the wire
    bytes of every frame of the turn."""
    from urllib.parse import urlsplit

    from websockets.sync.client import connect

    parts = urlsplit(url)
    sock = CountingSocket(socket.AF_INET, socket.SOCK_STREAM)
    sock.raw = bytearray()
    sock.connect((parts.hostname, parts.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with connect(url, sock=sock, max_size=None, compression="deflate" if compression else None) as ws:
        extensions = [type(e).__name__ for e in ws.protocol.extensions]
        kinds = [json.loads(ws.recv())["type"]]
        assert kinds[0] == "session_sync"
        ws.send(json.dumps({"type": "message", "content": PROMPT}))
        received: list[tuple[float, int]] = []
        chars = text_bytes = 0
        while True:
            raw = ws.recv()
            now = time.time()
            event = json.loads(raw)
            kinds.append(event["type"])
            if event["type"] == "stream_delta":
                chars += len(event["delta"])
                text_bytes += len(event["delta"].encode())
                received.append((now, chars))
            if event["type"] == "session_sync":
                break
    sizes = frame_sizes(bytes(sock.raw))[:len(kinds)]  # then the close frame
    delta_wire = sum(s for s, k in zip(sizes, kinds, strict=True) if k == "stream_delta")
    turn_wire = sum(sizes[1:])  # stream_start ... session_sync
    out.put({"received": received, "chars": chars, "text_bytes": text_bytes, "extensions": extensions,
             "frames": len(kinds) - 1, "delta_frames": kinds.count("stream_delta"),
             "delta_wire": delta_wire, "turn_wire": turn_wire})


def measure_single(live: Any, model: PacedModel, tokens: int, rate: float, compression: bool) -> dict[str, Any]:
    model.mode, model.count, model.rate = "prose", tokens, rate
    status, body = live.request("POST", "/sessions", {"title": "bench"})
    assert status in (200, 201), body
    queue: Any = CTX.Queue()
    proc = CTX.Process(target=one_client, args=(live.ws_url(body["session_id"]), compression, queue))
    proc.start()
    result = queue.get(timeout=300)
    proc.join(10)
    received, sent = result["received"], model.sent
    ends: list[int] = []
    total = 0
    for i in range(len(sent)):
        total += len(model.tokens[i % len(model.tokens)])
        ends.append(total)
    latencies: list[float] = []
    j = 0
    for t_sent, need in zip(sent, ends, strict=True):  # a token has arrived once its last char has
        while j < len(received) and received[j][1] < need:
            j += 1
        if j < len(received):
            latencies.append((received[j][0] - t_sent) * 1000)
    span = received[-1][0] - sent[0]
    tb = result["text_bytes"]
    return {"tokens": tokens, "tokens_per_s": tokens / span, "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99), "delta_frames": result["delta_frames"],
            "deflate": bool(result["extensions"]), "delta_x": result["delta_wire"] / tb,
            "turn_x": result["turn_wire"] / tb, "text_bytes": tb, "missing_chars": ends[-1] - result["chars"]}


# -- (b): 100 streaming sessions + a bystander -----------------------------------------------


def stream_clients(urls: list[str], start_at: float, stagger: float, out: Any) -> None:
    """Separate process: one WebSocket per session; each sends its message at its slot, then
    measures every token's latency from the stamp in its text."""
    raise_nofile()

    async def one(i: int, url: str) -> tuple[list[float], int, str]:
        from websockets.asyncio.client import connect

        lat: list[float] = []
        seen: list[float] = []
        async with connect(url, max_size=None, ping_interval=None, open_timeout=60) as ws:
            first = json.loads(await asyncio.wait_for(ws.recv(), 60))
            assert first["type"] == "session_sync", first
            await asyncio.sleep(max(0.0, start_at + i * stagger / len(urls) - time.time()))
            await ws.send(json.dumps({"type": "message", "content": PROMPT}))
            buf, ended = "", ""
            last_seq: int | None = None
            gaps = 0
            progress = time.monotonic()
            while True:
                # Heartbeats are not progress: a turn whose last events were lost would otherwise
                # keep this client waiting for ever (the server's heartbeat comes every 20 s).
                try:
                    raw = await asyncio.wait_for(ws.recv(), max(0.1, progress + 20 - time.monotonic()))
                except TimeoutError:
                    return lat, seen, f"nothing for 20 s after {len(lat)} tokens (seq gaps {gaps})"
                now = time.time()
                event = json.loads(raw)
                if event["type"] == "heartbeat":
                    continue
                progress = time.monotonic()
                seq = event.get("seq")
                if isinstance(seq, int):
                    if last_seq is not None and seq != last_seq + 1:
                        gaps += 1  # events lost between the server and this client
                    last_seq = seq
                if event["type"] == "stream_delta":
                    buf += event["delta"]
                    whole = len(buf) - len(buf) % 4
                    lat.extend(stamp_latency_ms(buf[k:k + 4], now) for k in range(0, whole, 4))
                    seen.extend([now] * (whole // 4))
                    buf = buf[whole:]
                elif event["type"] in ("stream_end", "error", "stream_stopped"):
                    ended = event["type"]
                elif event["type"] == "session_sync":
                    return lat, seen, ended if not gaps else f"{ended} with {gaps} seq gaps"

    async def main() -> None:
        results = await asyncio.gather(*(one(i, u) for i, u in enumerate(urls)), return_exceptions=True)
        lat: list[float] = []
        seen: list[float] = []
        failures: list[str] = []
        for r in results:
            if isinstance(r, BaseException):
                failures.append(repr(r))
            else:
                lat.extend(r[0])
                seen.extend(r[1])
                if r[2] != "stream_end":
                    failures.append(f"turn ended with {r[2]!r}")
        cpu = time.process_time()
        out.put({"latencies": lat, "seen": seen, "failures": failures, "cpu_s": cpu})

    asyncio.run(main())


def bystander(base_url: str, token: str, start_at: float, seconds: float, out: Any) -> None:
    """Separate process: GET /sessions 5 times a second (keep-alive, like a browser tab)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    lat: list[float] = []
    seen: list[float] = []
    errors = 0
    time.sleep(max(0.0, start_at - time.time()))
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        time.sleep(max(0.0, t0 + n * 0.2 - time.perf_counter()))
        n += 1
        began = time.perf_counter()
        try:
            conn.request("GET", "/sessions", headers={"Authorization": f"Bearer {token}"})
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                errors += 1
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
            continue
        lat.append((time.perf_counter() - began) * 1000)
        seen.append(time.time())
    out.put({"latencies": lat, "seen": seen, "errors": errors})


def create_sessions(live: Any, n: int) -> list[str]:
    out = []
    for i in range(n):
        status, body = live.request("POST", "/sessions", {"title": f"bench {i}"})
        assert status in (200, 201), body
        out.append(body["session_id"])
    return out


def measure_concurrent(live: Any, model: PacedModel, sids: list[str], rate: float, seconds: float) -> dict[str, Any]:
    model.mode, model.count, model.rate = "stamp", int(rate * seconds), rate
    stagger = 5.0  # the 100 messages are sent evenly over 5 s (not one burst)
    start_at = time.time() + 6.0  # time for 100 handshakes first
    q_stream: Any = CTX.Queue()
    q_by: Any = CTX.Queue()
    clients = CTX.Process(target=stream_clients, args=([live.ws_url(s) for s in sids], start_at, stagger, q_stream))
    by = CTX.Process(target=bystander, args=(live.url, live.token, start_at + stagger, seconds, q_by))
    clients.start()
    by.start()
    pid = live.procs[0].pid
    time.sleep(max(0.0, start_at + stagger - time.time()))
    cpu0 = cpu_seconds(pid)
    w0 = time.monotonic()
    streams = q_stream.get(timeout=seconds + 120)
    cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - w0) * 100
    bys = q_by.get(timeout=60)
    clients.join(10)
    by.join(10)
    lat, blat = streams["latencies"], bys["latencies"]
    return {"sessions": len(sids), "rate": rate, "tokens": len(lat), "expected": len(sids) * model.count,
            "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99), "max_ms": max(lat) if lat else float("nan"),
            "by_p50_ms": percentile(blat, 50), "by_p99_ms": percentile(blat, 99), "by_n": len(blat),
            "by_errors": bys["errors"], "failures": streams["failures"][:3], "n_failures": len(streams["failures"]),
            "steady_p99_ms": percentile([v for t, v in zip(streams["seen"], lat, strict=True)
                                         if start_at + stagger + 3 <= t <= start_at + seconds], 99),
            "server_cpu_pct": cpu, "client_cpu_s": streams["cpu_s"],
            "per_second_p99": per_second_p99(streams["seen"], lat, start_at),
            "by_per_second": per_second_p99(bys["seen"], blat, start_at)}


def per_second_p99(seen: list[float], lat: list[float], t0: float) -> str:
    """p99 of the tokens received in each second of the run (where the tail comes from)."""
    buckets: dict[int, list[float]] = {}
    for t, v in zip(seen, lat, strict=True):
        buckets.setdefault(int(t - t0), []).append(v)
    return " ".join(f"{k}s:{percentile(v, 99):.0f}" for k, v in sorted(buckets.items()))


# -- (c): idle connections ---------------------------------------------------------------------


def idle_clients(urls: list[str], hold: float, out: Any, ready: Any) -> None:
    """Separate process: open every connection (50 handshakes at a time), hold them idle like a
    browser tab (no client pings; the server's heartbeats and pings arrive and are answered)."""
    raise_nofile()

    async def main() -> None:
        from websockets.asyncio.client import connect

        gate = asyncio.Semaphore(50)
        conns: list[Any] = []
        counts = {"heartbeat": 0, "other": 0}

        async def opener(url: str) -> None:
            async with gate:
                ws = await connect(url, max_size=None, ping_interval=None, open_timeout=60)
            conns.append(ws)
            try:
                async for raw in ws:
                    kind = json.loads(raw)["type"]
                    counts["heartbeat" if kind == "heartbeat" else "other"] += 1
            except Exception:  # the close at the end
                pass

        tasks = [asyncio.create_task(opener(u)) for u in urls]
        while len(conns) < len(urls):
            await asyncio.sleep(0.1)
            if any(t.done() and t.exception() for t in tasks):
                break
        ready.put(len(conns))
        await asyncio.sleep(hold)
        open_ = sum(1 for c in conns if c.close_code is None)
        out.put({"opened": len(conns), "open_at_end": open_, **counts})
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
        for t in tasks:
            t.cancel()

    asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure_idle(live: Any, sids: list[str], n: int, hold: float) -> dict[str, Any]:
    pid = live.procs[0].pid
    rss_before = rss_mb(pid)
    urls = [live.ws_url(sids[i % len(sids)]) for i in range(n)]
    out: Any = CTX.Queue()
    ready: Any = CTX.Queue()
    t0 = time.monotonic()
    proc = CTX.Process(target=idle_clients, args=(urls, hold + 3.0, out, ready))
    proc.start()
    opened = ready.get(timeout=120)
    connect_s = time.monotonic() - t0
    time.sleep(3.0)  # the handshakes' tail settles
    cpu0, w0 = cpu_seconds(pid), time.monotonic()
    peak = 0.0
    while time.monotonic() - w0 < hold:
        time.sleep(1.0)
        peak = max(peak, rss_mb(pid))
    cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - w0) * 100
    rss = rss_mb(pid)
    result = out.get(timeout=60)
    proc.join(30)
    return {"connections": opened, "connect_s": connect_s, "cpu_pct": cpu, "rss_mb": rss, "rss_peak_mb": peak,
            "rss_before_mb": rss_before, "hold_s": hold, **result}


def raise_nofile(want: int = 8192) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))


def set_aids(live: Any, enabled: bool) -> None:
    """Switch the local-model aids of every profile (profiles are read from the DB per turn)."""
    live.manage("shell", "-c", "from profiles_app.models import AgentProfile; "
                f"AgentProfile.objects.update(local_model_aids_enabled={enabled})")


# -- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tier", default=os.environ.get("NAVI_TEST_TIER", "embedded"))
    parser.add_argument("--only", default="a,b,c", help="scenarios to run: a (includes d), b, c")
    parser.add_argument("--tokens", type=int, default=3000, help="(a) full-speed tokens")
    parser.add_argument("--rate", type=float, default=300.0, help="(a) paced tokens/s")
    parser.add_argument("--coalesce-ms", type=int, default=None, help="WS_DELTA_COALESCE_MS (default: config)")
    parser.add_argument("--env", action="append", default=[], help="extra server setting KEY=VALUE (experiments)")
    parser.add_argument("--aids", choices=("on", "off", "both"), default="both",
                        help="the profile's local-model aids (their 24-character hold-back adds latency); "
                             "'both' repeats (a) paced and (b) with them off")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--stream-seconds", type=float, default=20.0)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=30.0)
    args = parser.parse_args()
    only = set(args.only.split(","))
    raise_nofile()
    from navi_site.config import VARIABLES
    from tests.support.live import start_live_navi

    coalesce = args.coalesce_ms if args.coalesce_ms is not None else next(
        int(v.default) for v in VARIABLES if v.name == "WS_DELTA_COALESCE_MS")
    model = PacedModel()
    env = {"OLLAMA_HOST": f"http://127.0.0.1:{model.port}", "LOG_LEVEL": "ERROR",
           "WS_DELTA_COALESCE_MS": str(coalesce), **dict(kv.split("=", 1) for kv in args.env)}
    t_start = time.monotonic()
    live = start_live_navi(Path(tempfile.mkdtemp(prefix="navi-bench-")), env, tier=args.tier)
    print(f"tier={args.tier} WS_DELTA_COALESCE_MS={coalesce} {' '.join(args.env)} server pid={live.procs[0].pid}",
          flush=True)
    try:
        sids: list[str] = []
        for aids in (["on", "off"] if args.aids == "both" else [args.aids]):
            if aids == "off":
                set_aids(live, False)
            tag = f"[aids {aids}]"
            if "a" in only:
                runs = [("full speed", args.tokens, 0.0), (f"paced {args.rate:.0f} tok/s", int(args.rate * 5), args.rate)]
                for label, tokens, rate in runs if aids == "on" or args.aids == "off" else runs[1:]:
                    for compression in (True, False) if aids == "on" or args.aids == "off" else (True,):
                        r = measure_single(live, model, tokens, rate, compression)
                        print(f"(a) {tag} {label:16s} tokens={r['tokens']:5d} delivered={r['tokens_per_s']:7.0f} tok/s "
                              f"p50={r['p50_ms']:6.1f} ms p99={r['p99_ms']:6.1f} ms | (d) "
                              f"{'deflate' if r['deflate'] else 'plain  '} frames={r['delta_frames']:5d} "
                              f"deltas={r['delta_x']:.2f}x whole turn={r['turn_x']:.2f}x"
                              + (f" MISSING {r['missing_chars']} chars" if r["missing_chars"] else ""), flush=True)
            if "b" in only:
                sids = sids or create_sessions(live, args.sessions)
                r = measure_concurrent(live, model, sids, 50.0, args.stream_seconds)
                print(f"(b) {tag} {r['sessions']} sessions x {r['rate']:.0f} tok/s: tokens={r['tokens']}/{r['expected']} "
                      f"stream p50={r['p50_ms']:.1f} ms p99={r['p99_ms']:.1f} ms max={r['max_ms']:.0f} ms "
                      f"(all streaming: p99={r['steady_p99_ms']:.1f} ms) | "
                      f"bystander GET /sessions n={r['by_n']} p50={r['by_p50_ms']:.1f} ms p99={r['by_p99_ms']:.1f} ms "
                      f"errors={r['by_errors']} | server CPU {r['server_cpu_pct']:.0f}% "
                      f"| failed turns={r['n_failures']} {r['failures']}", flush=True)
                if args.verbose:
                    print(f"    client CPU {r['client_cpu_s']:.1f} s; p99 by second: {r['per_second_p99']}")
                    print(f"    bystander's worst by second: {r['by_per_second']}")
        if "c" in only:
            sids = sids or create_sessions(live, 100)
            r = measure_idle(live, sids, args.idle, args.hold)
            print(f"(c) {r['connections']} idle WebSockets held {r['hold_s']:.0f} s (opened in {r['connect_s']:.1f} s, "
                  f"{r['open_at_end']} open at the end, {r['heartbeat']} heartbeats): server CPU {r['cpu_pct']:.2f}% "
                  f"RSS {r['rss_mb']:.0f} MB (peak {r['rss_peak_mb']:.0f}, before connecting "
                  f"{r['rss_before_mb']:.0f})", flush=True)
    finally:
        live.stop()
    print(f"total {time.monotonic() - t_start:.0f} s")


if __name__ == "__main__":
    main()
