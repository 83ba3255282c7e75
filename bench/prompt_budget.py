"""What the default profile's prompt costs on a CPU: prompt tokens, time to first token (issue 24).

    python manage.py real_model start                      # the model server (after `real_model setup`)
    .venv/bin/python bench/prompt_budget.py [--profile secretary] [--rounds 3] [--tool-calling constrained]

Starts a live Navi whose profile (default: ``secretary``, the default profile) talks to the model
server at $NAVI_REAL_MODEL_URL through a recording proxy in this process, with planning off (the
planner's own request would measure something else). Each round:

1. *cold new conversation*: the server's prompt cache is first given an unrelated prompt (a
   single-slot llama.cpp server keeps only the last prompt), then a new session gets a question
   that needs no tool; time to the first ``stream_delta``;
2. *warm follow-up*: a second question in the same session.

Prints per round the prompt tokens of each request (the server's own ``usage``), the times, and
whether the system prompt and tool definitions of the follow-up's requests are byte-identical to
the first turn's (the prefix a prompt cache keeps); then medians.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.realmodel.scenarios import Env, default_model_url, model_aliases, start_navi_for_model, turn  # noqa: E402

QUESTIONS = [("In one sentence: what is a good name for a grey cat?", "And one for a brown dog?"),
             ("In one sentence: why is the sky blue?", "And why are sunsets red?"),
             ("In one sentence: what is a haiku?", "Give me a very short one about rain.")]


class Proxy:
    """Forwards /v1/* to the model server and keeps every chat request and its usage."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.records: list[dict[str, Any]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None

    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/v1/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._session = ClientSession(timeout=ClientTimeout(total=1800))
        return f"http://127.0.0.1:{self.port}/v1"

    async def stop(self) -> None:
        if self._session:
            await self._session.close()
        if self._runner:
            await self._runner.cleanup()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        record: dict[str, Any] = {"path": request.path, "at": time.monotonic()}
        try:
            record["json"] = json.loads(body) if body else None
        except ValueError:
            record["json"] = None
        if request.path.endswith("/chat/completions"):
            self.records.append(record)
        url = self.upstream + request.path[len("/v1"):]
        async with self._session.request(request.method, url, data=body,
                                         headers={"Content-Type": "application/json"}) as upstream:
            response = web.StreamResponse(status=upstream.status,
                                          headers={"Content-Type": upstream.headers.get("Content-Type", "")})
            await response.prepare(request)
            buffer = b""
            async for chunk in upstream.content.iter_any():
                if not record.get("first_byte"):
                    record["first_byte"] = time.monotonic()
                buffer += chunk
                await response.write(chunk)
            record["usage"] = _usage(buffer)
            record["status"] = upstream.status
            await response.write_eof()
            return response


def _usage(raw: bytes) -> dict[str, Any] | None:
    for line in reversed(raw.decode("utf-8", "replace").splitlines()):
        payload = line[5:].strip() if line.startswith("data:") else line.strip()
        if '"usage"' not in payload:
            continue
        try:
            usage = json.loads(payload).get("usage")
        except ValueError:
            continue
        if isinstance(usage, dict):
            return usage
    return None


_GENERATE = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")


class ServerLog:
    """Prompt sizes from llama-cpp-python's log (its streamed answers carry no usage): for each
    request, the tokens it shared with the cached prompt plus the tokens it evaluated."""

    def __init__(self) -> None:
        from local_models.catalog import cache_dir

        self.path = cache_dir() / "server.log"
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def since_last(self) -> list[tuple[int, int]]:
        """(total prompt tokens, evaluated) of each request logged since the previous call."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            text = fh.read().decode("utf-8", "replace")
            self.offset = fh.tell()
        return [(int(hit) + int(rest), int(rest)) for hit, rest in _GENERATE.findall(text)]


def evict(url: str, alias: str) -> None:
    """Give the server's prompt cache an unrelated prompt (a single slot keeps only the last)."""
    body = json.dumps({"model": alias, "max_tokens": 1, "messages": [
        {"role": "user", "content": f"Reply OK. {time.time()}"}]}).encode()
    req = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        resp.read()


def prefix(record: dict[str, Any]) -> str:
    """The part of a request a prompt cache keeps for a session: first system message and tools."""
    body = record.get("json") or {}
    messages = body.get("messages") or [{}]
    return json.dumps([messages[0], body.get("tools")], sort_keys=True)


async def bench(args: argparse.Namespace) -> None:
    url = args.url.rstrip("/")
    aliases = model_aliases(url)
    if not aliases:
        sys.exit(f"no model server answers at {url}/models: run `python manage.py real_model start` first")
    alias = aliases[0]
    proxy = Proxy(url)
    proxied = await proxy.start()
    navi = start_navi_for_model(Path(tempfile.mkdtemp(prefix="navi-bench-prompt-")), proxied, alias)
    fields = {"llm_backend": "openai", "model": alias, "planning_enabled": False}
    if args.tool_calling:
        fields["tool_calling"] = args.tool_calling
    navi.manage("shell", "-c", "from profiles_app.models import AgentProfile; "
                f"AgentProfile.objects.filter(id={args.profile!r}).update(**{fields!r})")
    rows = []
    server_log = ServerLog()
    try:
        for n in range(args.rounds):
            first_q, second_q = QUESTIONS[n % len(QUESTIONS)]
            await asyncio.to_thread(evict, url, alias)
            sid = _session(navi, args.profile, n)
            server_log.since_last()
            mark = len(proxy.records)
            began = time.monotonic()
            t1 = await turn_timed(navi, sid, first_q)
            first = proxy.records[mark:]
            first_log = server_log.since_last()
            mark = len(proxy.records)
            t2 = await turn_timed(navi, sid, second_q)
            second = proxy.records[mark:]
            second_log = server_log.since_last()
            same = bool(first and second) and all(prefix(r) == prefix(first[0]) for r in second)
            row = {"round": n + 1, "cold_ttft": t1[0], "cold_turn": t1[1], "warm_ttft": t2[0], "warm_turn": t2[1],
                   "prompt_tokens": [(r.get("usage") or {}).get("prompt_tokens") for r in first + second],
                   "server_prompt_tokens": [total for total, _ in first_log + second_log],
                   "server_evaluated": [done for _, done in first_log + second_log],
                   "requests": [len(first), len(second)], "prefix_identical": same,
                   "answers": [t1[2][:80], t2[2][:80]], "wall": time.monotonic() - began}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        navi.stop()
        await proxy.stop()
    if args.json:
        dump = json.dumps({"rows": rows, "requests": proxy.records}, indent=1, default=str)
        await asyncio.to_thread(Path(args.json).write_text, dump)
    def med(key: str) -> str:
        values = [r[key] for r in rows if r[key] is not None]
        return f"{statistics.median(values):.1f}" if values else "-"
    first_prompts = [r["prompt_tokens"][0] or (r["server_prompt_tokens"] or [None])[0] for r in rows]
    print(f"\nprofile {args.profile}, model {alias}, {len(rows)} rounds")
    print(f"prompt tokens of a new conversation's first request: {sorted({p for p in first_prompts if p})}")
    print(f"cold new conversation: time to first token median {med('cold_ttft')} s (turn {med('cold_turn')} s)")
    print(f"warm follow-up: time to first token median {med('warm_ttft')} s (turn {med('warm_turn')} s)")
    print(f"prefix byte-identical across the turns: {all(r['prefix_identical'] for r in rows)}")


def _session(navi: Any, profile: str, n: int) -> str:
    status, out = navi.request("POST", "/sessions", {"profile_id": profile, "title": f"budget {n}"})
    if status != 201:
        raise RuntimeError(f"POST /sessions failed: {status} {out}")
    return str(out["session_id"])


async def turn_timed(navi: Any, sid: str, text: str) -> tuple[float | None, float, str]:
    began = time.monotonic()
    t = await turn(Env(navi=navi, model_url="", alias=""), sid, text)
    first = next((e["_t"] for e in t.events if e["type"] == "stream_delta" and "_t" in e), None)
    return (first - began if first is not None else None), t.seconds, t.final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="secretary")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tool-calling", default="", help="set the profile's tool_calling (auto|native|constrained)")
    parser.add_argument("--url", default=default_model_url())
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
