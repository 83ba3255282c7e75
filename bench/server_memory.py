"""How the model server's memory grows with constrained requests (issue 24).

    .venv/bin/python bench/server_memory.py [--model qwen|qwen1.5b] [--requests 60] [--port 8097] [--threads 1]
                                            [--env NAME=VALUE ...] [--plain-first N] [--no-trim] [--logits-all]

Starts its own ``llama_serve.py`` server (the command ``real_model start`` runs, on a port of its own, from
the cache ``real_model setup`` filled), then sends it requests the way Navi's constrained decisions do: the
``local_small`` tools in the chat template, one of ``bench/choice_requests.py``'s requests as the user's
message, Navi's call instruction last, and the JSON schema of a call of any of those tools
(``agent.decide.call_schema``) as ``response_format``. It prints the server's resident memory (VmRSS)
before the first request, after the first, and every tenth after that, with the growth per request over the
second half of the run, and the seconds of the first request (the whole prompt read) and of the others.
``--logits-all`` runs the server as before round 22 (keeping the logits of every token). ``--env`` runs the server with extra environment variables (``MALLOC_ARENA_MAX=2``);
``--no-trim`` runs the server without the wrapper's freeing of each request's sampler and return of freed
memory to the system, for a before/after.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server's environment")
    parser.add_argument("--plain-first", type=int, default=0,
                        help="send this many requests without a schema first (what the grammar itself costs)")
    parser.add_argument("--logits-all", action="store_true",
                        help="run the server as before round 22, keeping the logits of every token")
    parser.add_argument("--no-trim", action="store_true", help="run the server without freeing each request's sampler and memory")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "navi_site.settings")
    import django

    django.setup()
    from agent.decide import call_messages, call_schema
    from bench.choice_requests import requests
    from bench.tool_choice import every_tool
    from local_models.catalog import cache_dir, model_spec
    from local_models.server import Paths, server_command

    spec = model_spec(args.model)
    paths = Paths(cache=cache_dir(None))
    model_path = paths.cache / "models" / spec.filename
    port = args.port or free_port()
    cmd = server_command(paths, spec, model_path, port=port, threads=args.threads)
    if args.no_trim:
        cmd.append("--no_trim")
    if args.logits_all:
        cmd[cmd.index("--logits_all") + 1] = "True"
    env = {**os.environ, **dict(e.split("=", 1) for e in args.env)}
    handle, name = tempfile.mkstemp(prefix="navi-bench-memory-", suffix=".log")
    os.close(handle)
    log = Path(name)
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    tools = every_tool()
    schema = call_schema(tools)
    texts = [r.text for r in requests("both")]
    try:
        with httpx.Client(timeout=600) as client:
            deadline = time.monotonic() + 180
            while True:
                try:
                    alias = client.get(f"{url}/models").json()["data"][0]["id"]
                    break
                except (httpx.HTTPError, ValueError, KeyError, IndexError):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"the server did not start; see {log}") from None
                    time.sleep(0.5)
            print(f"model {alias}, server pid {proc.pid}, {args.requests} constrained requests, "
                  f"env {args.env or 'as is'}, trim {'off' if args.no_trim else 'on'}, "
                  f"logits_all {args.logits_all}; log {log}")
            readings: list[tuple[int, float]] = [(0, rss_mb(proc.pid))]
            seconds: list[float] = []
            print(f"  before the first request: {readings[0][1]:7.0f} MB")
            for i in range(1, args.requests + 1):
                text = texts[(i - 1) % len(texts)]
                instruction = call_messages([], tools=tools)[-1]
                body: dict[str, Any] = {
                    "model": alias, "temperature": 0, "max_tokens": 200, "stream": True, "tools": tools,
                    "messages": [{"role": "system", "content": "You are Navi, a personal assistant."},
                                 {"role": "user", "content": text},
                                 {"role": "system", "content": instruction.content}],
                    "response_format": {"type": "json_object", "schema": schema}}
                if i <= args.plain_first:
                    del body["response_format"]
                    body["max_tokens"] = 40
                text = ""
                began = time.monotonic()
                with client.stream("POST", f"{url}/chat/completions", json=body) as reply:  # as Navi's stream
                    reply.raise_for_status()
                    for line in reply.iter_lines():
                        if line.startswith("data: {"):
                            text += json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                if i > args.plain_first:
                    json.loads(text or "null")
                seconds.append(time.monotonic() - began)
                readings.append((i, rss_mb(proc.pid)))
                if i in (1, args.plain_first, args.plain_first + 1) or i % 10 == 0:
                    print(f"  after request {i:3d}: {readings[-1][1]:7.0f} MB")
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    half = readings[len(readings) // 2:]
    if len(half) > 1:
        slope = (half[-1][1] - half[0][1]) / (half[-1][0] - half[0][0])
        print(f"growth over requests {half[0][0]}-{half[-1][0]}: {slope:+.2f} MB per request; "
              f"peak {max(r for _, r in readings):.0f} MB")
    if seconds:
        rest = sorted(seconds[1:]) or [0.0]
        print(f"seconds: first request (the whole prompt read) {seconds[0]:.1f}; the others (the prompt's prefix "
              f"cached) p50 {rest[len(rest) // 2]:.1f}, p90 {rest[int(len(rest) * 0.9)]:.1f}")


if __name__ == "__main__":
    main()
