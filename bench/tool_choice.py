"""How a small model's first step is chosen: answer in words, or which tool (issue 24).

    .venv/bin/python manage.py real_model start --threads 1
    .venv/bin/python bench/tool_choice.py capture --out /tmp/choice-requests.json
    .venv/bin/python bench/tool_choice.py run --requests /tmp/choice-requests.json --half dev [--strategy navi]

``capture`` starts a live Navi whose ``local_small`` profile talks to a recording stand-in for the
model server: every request of ``bench/choice_requests.py`` is sent as a new conversation (its files
in the session's folder), and the first request Navi makes of the model for it (system prompt, tool
definitions, the user's message and any note Navi adds) is kept, exactly as Navi sent it. ``run``
replays those requests against the real model server ($NAVI_REAL_MODEL_URL, default
http://127.0.0.1:8089/v1) and reports, per intent, how often the first step was right: the
model's own reply (a valid call of a tool, an answer in words), then, where the reply was an
attempt to call that cannot run as written, the call generated under the schema of the offered
tools (agent/decide.py). A first step is right when it is an answer for a request that needs no
tool (or whose answer the prompt holds: the date), or a call of one of the request's tools.

This measures the choice alone, in seconds per request, on more requests and other words than the
broad suite: a mechanism is chosen on the dev half and both halves are reported.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.choice_requests import ANSWER, FILES, requests  # noqa: E402

# -- capture -------------------------------------------------------------------------------------

async def _recorder(alias: str, seen: list[dict[str, Any]]) -> tuple[Any, int]:
    """A stand-in model server: keeps every chat request, answers each with a short streamed "OK."."""
    from aiohttp import web

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": alias, "object": "model"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": alias,
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "OK."}, "finish_reason": None}]}
        end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        if not body.get("stream"):
            return web.json_response({"id": "c", "object": "chat.completion", "created": 0, "model": alias,
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK."},
                                                   "finish_reason": "stop"}],
                                      "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for part in (chunk, end):
            await response.write(f"data: {json.dumps(part)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


async def capture(args: argparse.Namespace) -> list[dict[str, Any]]:
    from tests.realmodel.scenarios import Env, model_aliases, new_session, start_navi_for_model, turn

    aliases = model_aliases(args.url.rstrip("/")) if args.alias is None else [args.alias]
    alias = (aliases or ["qwen2.5-coder-0.5b-instruct"])[0]
    seen: list[dict[str, Any]] = []
    runner, port = await _recorder(alias, seen)
    navi = start_navi_for_model(Path(tempfile.mkdtemp(prefix="navi-bench-choice-")), f"http://127.0.0.1:{port}/v1", alias)
    env = Env(navi=navi, model_url=args.url, alias=alias)
    out = []
    try:
        for req in requests("both"):
            sid = new_session(env, req.intent)
            folder = env.session_files / sid
            folder.mkdir(parents=True, exist_ok=True)
            for name in req.files:
                (folder / name).write_text(FILES[name])
            before = len(seen)
            await turn(env, sid, req.text, timeout=60)
            first = next((b for b in seen[before:] if b.get("tools") and not b.get("response_format")), None)
            if first is None:
                print(f"no request with tools for {req.text!r}", flush=True)
                continue
            out.append({"intent": req.intent, "text": req.text, "want": sorted(req.want), "split": req.split,
                        "request": first})
            print(f"captured {req.intent}: {req.text}", flush=True)
    finally:
        navi.stop()
        await runner.cleanup()
    return out


# -- run -----------------------------------------------------------------------------------------

def _post(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"{url}/chat/completions", json=body, timeout=600)
    response.raise_for_status()
    return response.json()


def _text(reply: dict[str, Any]) -> str:
    return str(reply["choices"][0]["message"].get("content") or "")


def free_reply(client: httpx.Client, url: str, request: dict[str, Any]) -> str:
    body = {**request, "stream": False, "max_tokens": 160, "temperature": 0}
    body.pop("stream_options", None)
    return _text(_post(client, url, body))


def classify(text: str, names: set[str]) -> tuple[str, str | None]:
    """("answer" | "call" | "attempt", tool): what the model's own reply is, as Navi reads it."""
    from agent.decide import argument_problem, described_call
    from agent.textcalls import extract_text_tool_calls

    found = extract_text_tool_calls(text, names, extra_keys_alone=True)
    if found.calls:
        return "call", found.calls[0].name
    stripped = text.strip()
    if found.unknown_tool or found.malformed or stripped.startswith(("{", "[", "```", "<tool_call>")) \
            or described_call(text, names):
        return "attempt", None
    del argument_problem
    return "answer", None


def every_tool() -> list[dict[str, Any]]:
    """The full definitions of local_small's tools, closed domains filled in: what Navi's grammar is built
    from (``ToolPlan.every``), whatever the request showed the model."""
    import django

    django.setup()
    from agent.domains import PROFILES, TOOLS, close_domains
    from local_models.profile import PROFILE_ID
    from local_models.profile import TOOLS as NAMES
    from tools_app.registry import get_registry

    order = {n: i for i, n in enumerate(NAMES)}
    schemas = close_domains(get_registry().schemas(NAMES), {PROFILES: [PROFILE_ID], TOOLS: NAMES})
    return sorted(schemas, key=lambda s: order[s["function"]["name"]])


def constrained(client: httpx.Client, url: str, request: dict[str, Any], tools: list[dict[str, Any]]) -> str | None:
    """The call Navi generates under the schema of the offered tools (agent.decide)."""
    from agent.decide import call_messages, call_schema

    instruction = call_messages([], tools=tools)[-1]  # the loop's own instruction, menu and time now
    messages = [*request["messages"], {"role": "system", "content": instruction.content}]
    body = {**request, "messages": messages, "stream": False, "max_tokens": 200, "temperature": 0,
            "response_format": {"type": "json_object", "schema": call_schema(tools)}}
    body.pop("stream_options", None)
    try:
        value = json.loads(_text(_post(client, url, body)))
    except ValueError:
        return None
    return value.get("tool") if isinstance(value, dict) else None


def run(args: argparse.Namespace) -> None:
    captured = json.loads(Path(args.requests).read_text())
    chosen = [c for c in captured if args.half == "both" or c["split"] == args.half]
    if args.intents:
        chosen = [c for c in chosen if c["intent"] in args.intents.split(",")]
    url = args.url.rstrip("/")
    rows: list[dict[str, Any]] = []
    with httpx.Client() as client:
        alias = client.get(f"{url}/models", timeout=10).json()["data"][0]["id"]
        every = every_tool()
        from agent.decide import attempted_tools

        files_named = {r.text: r.files for r in requests("both")}
        want_of = {r.text: r.want for r in requests("both")}  # the labels as they are now
        for item in chosen:
            request = {**item["request"], "model": alias}
            names = {t["function"]["name"] for t in [*request["tools"], *every]}
            began = time.monotonic()
            text = free_reply(client, url, request)
            kind, tool = classify(text, names)
            files = files_named.get(item["text"], ())
            if kind == "answer" and files and not args.no_second_chance:
                # Navi holds an answer to a message naming files nobody read (not shown, not kept) and tells
                # the model once (the named_files aid): its second reply is the step.
                from agent.aids import unread_note

                told = {**request, "messages": [*request["messages"], {"role": "user", "content": unread_note(files)}]}
                text = free_reply(client, url, told)
                kind, tool = classify(text, names)
                kind = f"{kind}²"
            if kind.startswith("attempt"):
                pointed = attempted_tools(text, [], every) if not args.every_tool else []
                tool = constrained(client, url, request, [t for t in every if t["function"]["name"] in pointed] or every)
            want = set(want_of.get(item["text"], item["want"]))
            first = tool if not kind.startswith("answer") else None
            ok = (first is None and (not want or ANSWER in want)) or (first in want)
            rows.append({**{k: item[k] for k in ("intent", "text", "split")}, "kind": kind, "tool": first,
                         "ok": ok, "reply": text[:300], "seconds": round(time.monotonic() - began, 1)})
            print(f"{'ok ' if ok else 'BAD'} {item['intent']:10} {kind:8} {str(first):22} {item['text'][:60]!r} "
                  f"| {text[:90]!r}", flush=True)
    by_intent: dict[str, list[bool]] = defaultdict(list)
    for row in rows:
        by_intent[row["intent"]].append(row["ok"])
    print("\n| intent | right first step |\n|---|---|")
    for intent, oks in by_intent.items():
        print(f"| {intent} | {sum(oks)}/{len(oks)} |")
    total = sum(r["ok"] for r in rows)
    print(f"| **all** | **{total}/{len(rows)} = {100 * total / max(1, len(rows)):.0f} %** |")
    print(f"median seconds per request: {statistics.median(r['seconds'] for r in rows):.1f}")
    wrong = Counter((r["intent"], r["tool"]) for r in rows if not r["ok"])
    print("wrong choices:", dict(wrong))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["capture", "run"])
    parser.add_argument("--url", default=os.environ.get("NAVI_REAL_MODEL_URL", "http://127.0.0.1:8089/v1"))
    parser.add_argument("--alias", default=None)
    parser.add_argument("--out", default="/tmp/choice-requests.json")
    parser.add_argument("--requests", default="/tmp/choice-requests.json")
    parser.add_argument("--half", default="dev", choices=["dev", "test", "both"])
    parser.add_argument("--intents", default="")
    parser.add_argument("--json", default="")
    parser.add_argument("--every-tool", action="store_true",
                        help="generate an attempt's call under every tool's schema (before attempted_tools)")
    parser.add_argument("--no-second-chance", action="store_true",
                        help="count the first reply only (no held answer for a message naming an unread file)")
    args = parser.parse_args()
    if args.action == "capture":
        out = asyncio.run(capture(args))
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(f"{len(out)} requests -> {args.out}")
    else:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "navi_site.settings")
        run(args)


if __name__ == "__main__":
    main()
