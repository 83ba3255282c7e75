"""Everyday tasks for a real small model, driven over Navi's WebSocket (issue 11).

Shared by the opt-in test tier (``tests/realmodel``) and the benchmark
(``bench/real_model.py``). Each task talks to a live Navi like a user would and
checks what the user sees or what was stored — the tool's time in the answer,
the note in the notes store, the recall's instruction, the fact in memory —
never the model's wording alone. A task returns an ``Outcome``; it never raises
for a wrong answer (the benchmark counts failures), only for a broken harness.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from tests.support.live import LiveNavi

PROFILE = "local_small"
TERMINAL = ("stream_end", "error", "stream_stopped")
TURN_TIMEOUT = 300.0  # seconds; a 0.5B model on 2 busy cores with a cold prompt cache


@dataclass
class Env:
    navi: LiveNavi
    model_url: str  # the model server's OpenAI base URL (…/v1)
    alias: str
    run: int = 0  # which repetition (the benchmark varies distinctive values with it)

    @property
    def session_files(self) -> Path:
        return Path(self.navi.env["SESSION_FILES_DIR"])

    @property
    def data_dir(self) -> Path:
        return Path(self.navi.env["NAVI_DATA_DIR"])


@dataclass
class Turn:
    events: list[dict[str, Any]]
    seconds: float
    asked: str = ""  # the user's message of this turn

    @property
    def end(self) -> str:
        return self.events[-1]["type"] if self.events else "none"

    @property
    def final(self) -> str:
        return next((e.get("content") or "" for e in reversed(self.events) if e["type"] == "stream_end"), "")

    @property
    def shown(self) -> str:
        return "".join(e["delta"] for e in self.events if e["type"] == "stream_delta" and not e.get("is_subagent"))

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == "tool_call" and (tool is None or e["tool"] == tool)]

    @property
    def approvals(self) -> list[dict[str, Any]]:
        """The approval cards the turn showed (the harness denies each: ``turn``)."""
        return [e for e in self.events if e["type"] == "approval_required"]

    @property
    def started(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == "tool_started"]

    def brief(self) -> str:
        calls = ", ".join(f"{c['tool']}({json.dumps(c['args'])[:80]})->{'ok' if c['success'] else 'fail'}"
                          for c in self.calls())
        error = next((e.get("message", "") for e in self.events if e["type"] == "error"), "")
        return f"end={self.end} calls=[{calls}] answer={self.final[:200]!r}{' error=' + error if error else ''}"


@dataclass
class Outcome:
    ok: bool
    detail: str
    seconds: float = 0.0
    turns: list[Turn] = field(default_factory=list)
    # The task's own check alone (the answer / what was stored), before the penalties for a raw
    # call shown or unrequested side-effect tools: the benchmark shows both, so a table tells
    # "did the job" apart from "did the job cleanly".
    core_ok: bool = False


# -- driving Navi ----------------------------------------------------------------------------


def new_session(env: Env, title: str) -> str:
    # A title up front: an untitled session would get one from the model, a second request
    # competing for the single CPU slot (and evicting the prompt cache) after every first turn.
    status, out = env.navi.request("POST", "/sessions", {"profile_id": PROFILE, "title": title})
    if status != 201:
        raise RuntimeError(f"POST /sessions failed: {status} {out}")
    return str(out["session_id"])


async def turn(env: Env, sid: str, text: str, *, stop_after_deltas: int | None = None,
               timeout: float = TURN_TIMEOUT) -> Turn:
    """One user message over ``ws/sessions/{sid}``; events until stream_end / error / stream_stopped.

    With ``stop_after_deltas`` a stop frame is sent once that many text deltas arrived.
    """
    start = time.monotonic()
    events: list[dict[str, Any]] = []
    async with connect(env.navi.ws_url(sid), max_size=64 * 1024 * 1024, open_timeout=15, close_timeout=2) as ws:
        await ws.send(json.dumps({"type": "message", "content": text}))
        stopped = False
        deadline = start + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                events.append({"type": "error", "message": f"harness: no end of turn within {timeout:.0f} s"})
                break
            try:
                event = json.loads(await asyncio.wait_for(ws.recv(), remaining))
            except TimeoutError:
                continue  # the deadline passed: said above, as the turn's error
            if event["type"] in ("heartbeat", "session_sync"):
                continue
            event["_t"] = time.monotonic()  # when it arrived (time to first token)
            events.append(event)
            if event["type"] in TERMINAL and not event.get("frame"):  # an error about a frame: the turn goes on
                break
            if event["type"] == "approval_required":
                # No task asks for anything that needs approval (the session's own folder needs none): the user
                # denies what they did not ask for, as a person at the card would, and the turn goes on (the 0.5B
                # wrote /home/navi/water.txt for an hourly reminder, and the turn waited for the card; round 23).
                await ws.send(json.dumps({"type": "approval", "approval_id": event["approval_id"],
                                          "decision": "deny", "scope": "once", "reason": "I did not ask for that."}))
            deltas = sum(1 for e in events if e["type"] == "stream_delta")
            if stop_after_deltas is not None and not stopped and deltas >= stop_after_deltas:
                await ws.send(json.dumps({"type": "stop"}))
                stopped = True
    return Turn(events=events, seconds=time.monotonic() - start, asked=text)


def get(env: Env, path: str) -> Any:
    status, out = env.navi.request("GET", path)
    if status != 200:
        raise RuntimeError(f"GET {path} failed: {status} {out}")
    return out


async def poll(check: Callable[[], Any], *, timeout: float, every: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(every)


SIDE_EFFECTS = {"user_notes", "memory_save", "schedule_recall", "todo", "spawn_agent", "filesystem"}


# A task that reads files allows READING; a file changed there is a side effect nobody asked for (from round 30: the
# 1.5B wrote a made-up subagent.conf on its way to a subagent that was to read facts.txt).
READING = "filesystem (reading)"
FILE_CHANGES = {"write", "append", "delete", "move", "mkdir"}


def _effect(call: dict[str, Any]) -> str:
    """What a call did, as ``allowed`` names it: a filesystem call that changes nothing is READING."""
    if call["tool"] == "filesystem" and (call.get("args") or {}).get("action") not in FILE_CHANGES:
        return READING
    return str(call["tool"])


def _done(start: float, ok: bool, detail: str, *turns: Turn, allowed: frozenset[str] = frozenset()) -> Outcome:
    """Also fails a run whose answer is a raw tool call, or that ran tools the task never asked for."""
    core_ok = ok
    problems = []
    for t in turns:
        if '"name"' in t.final and '"arguments"' in t.final:
            problems.append("the answer shown is a raw tool call")
        for asked in t.approvals:
            problems.append(f"asked to approve {asked['tool']}({json.dumps(asked.get('args'))[:80]}), which the "
                            "task never needs (denied)")
        stray = sorted({_effect(c) for c in t.calls() if c["tool"] in SIDE_EFFECTS and _effect(c) not in allowed})
        if stray:
            problems.append(f"ran unrequested tools {stray}")
    if problems:
        ok, detail = False, "; ".join(problems) + "; " + detail
    return Outcome(ok=ok, detail=detail, seconds=time.monotonic() - start, turns=list(turns), core_ok=core_ok)


# -- the tasks -------------------------------------------------------------------------------


async def plain_question(env: Env) -> Outcome:
    """A plain question, streamed in several deltas, answered without tools."""
    start = time.monotonic()
    t = await turn(env, new_session(env, "plain question"), "What is the capital of France? Answer in one sentence.")
    deltas = [e for e in t.events if e["type"] == "stream_delta"]
    ok = (t.end == "stream_end" and len(deltas) >= 2 and t.shown.strip() == t.final.strip()
          and "paris" in t.final.lower() and not t.started)
    return _done(start, ok, f"{len(deltas)} deltas; {t.brief()}", t)


def _clock_forms(iso: str) -> set[str]:
    """'19:05' and the 12-hour forms '7:05' of the UTC time in a get_current_datetime result."""
    when = datetime.fromisoformat(iso)
    forms = set()
    for moment in (when, when + timedelta(minutes=1)):  # the answer may round up
        forms.add(f"{moment:%H:%M}")
        forms.add(f"{moment.hour % 12 or 12}:{moment:%M}")
    return forms


async def what_time(env: Env) -> Outcome:
    """A tool round trip: the answer carries the time that get_current_datetime returned."""
    start = time.monotonic()
    t = await turn(env, new_session(env, "time"), "What time is it right now (UTC)?")
    calls = [c for c in t.calls("get_current_datetime") if c["success"]]
    if not calls:
        return _done(start, False, f"no successful get_current_datetime call; {t.brief()}", t)
    match = re.search(r"UTC: (\S+)", calls[0]["result"])
    forms = _clock_forms(match.group(1)) if match else set()
    ok = t.end == "stream_end" and any(f in t.final for f in forms)
    return _done(start, ok, f"tool time forms {sorted(forms)}; {t.brief()}", t)


async def read_file(env: Env) -> Outcome:
    """Read a file in the session's directory and answer from it (a fact the model cannot guess)."""
    start = time.monotonic()
    sid = new_session(env, "read a file")
    code = f"HERON-{random.randint(100, 999)}"
    folder = env.session_files / sid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "project.txt").write_text(f"Project notes\nThe project codename is {code}.\nThe deadline is March 3.\n")
    t = await turn(env, sid, "Read the file project.txt and tell me the project codename.")
    read = [c for c in t.calls("filesystem") if c["success"] and code in c["result"]]
    ok = t.end == "stream_end" and bool(read) and code in t.final
    return _done(start, ok, f"codename {code}; {t.brief()}", t, allowed=frozenset({READING}))


def _notes(env: Env) -> list[dict[str, Any]]:
    try:
        data = json.loads((env.data_dir / "user_notes.json").read_text())
    except (OSError, ValueError):
        return []
    return [n for book in data.get("users", {}).values() for n in book.get("notes", [])]


async def write_note(env: Env) -> Outcome:
    """user_notes add: the note is in the notes store."""
    start = time.monotonic()
    number = random.randint(1000, 9999)
    t = await turn(env, new_session(env, "note"), f"Note down: call the plumber about invoice {number}.")
    found = [n for n in _notes(env) if str(number) in n["text"]]
    ok = t.end == "stream_end" and bool(found)
    return _done(start, ok, f"note with {number}: {found[:1]}; {t.brief()}", t, allowed=frozenset({"user_notes"}))


SERVER_NAMES = ["atlas", "boreas", "cygnus", "draco", "electra", "fornax", "gemini", "hydra"]


async def remember(env: Env) -> Outcome:
    """"Remember that my server is called X" → a fact in memory → a new session knows X."""
    start = time.monotonic()
    # A name no earlier run left in this Navi's memory: a stale fact must not pass the check.
    known = " ".join(f"{f['key']} {f['value']}" for f in get(env, "/memory/facts?limit=100")["items"]).lower()
    known += " " + (get(env, "/memory/summary")["summary"] or "").lower()
    rotated = SERVER_NAMES[env.run % len(SERVER_NAMES):] + SERVER_NAMES[:env.run % len(SERVER_NAMES)]
    name = next((n for n in rotated if n not in known), f"{rotated[0]}{random.randint(10, 99)}")
    t1 = await turn(env, new_session(env, "remember"), f"Remember that my server is called {name}.")
    facts = await poll(lambda: [f for f in get(env, "/memory/facts?limit=100")["items"]
                                if name in f["value"].lower() or name in f["key"].lower()], timeout=10)
    if not facts:
        return _done(start, False, f"no memory fact naming {name}; {t1.brief()}", t1,
                     allowed=frozenset({"memory_save"}))
    # The summary injected into new sessions is rebuilt by a Celery task (the embedded worker).
    summary = await poll(lambda: name in get(env, "/memory/summary")["summary"].lower(), timeout=240, every=3)
    t2 = await turn(env, new_session(env, "recall a fact"), "What is my server called?")
    ok = t2.end == "stream_end" and name in t2.final.lower()
    return _done(start, ok, f"fact {facts[0]['key']}={facts[0]['value']!r}; summary has it: {bool(summary)}; "
                 f"second session: {t2.brief()}", t1, t2, allowed=frozenset({"memory_save"}))


async def remind_me(env: Env) -> Outcome:
    """"Remind me in 2 minutes to check /tmp/build.log" → a one-off recall naming the file, due in ~2 min."""
    start = time.monotonic()
    sid = new_session(env, "reminder")
    asked = datetime.now(UTC)
    t = await turn(env, sid, "Remind me in 2 minutes to check /tmp/build.log")
    recall = get(env, f"/sessions/{sid}/recall")
    if not recall or not recall.get("id"):
        return _done(start, False, f"no recall; {t.brief()}", t, allowed=frozenset({"schedule_recall"}))
    due = datetime.fromisoformat(recall["trigger_at"])
    minutes = (due - asked).total_seconds() / 60
    # A reminder every minute is not what "remind me in 2 minutes" asked for.
    ok = ("/tmp/build.log" in recall["additional_context_message"] and 1.0 <= minutes <= 4.0
          and recall.get("call_type") == "once" and t.end == "stream_end")
    if recall.get("id"):
        env.navi.request("DELETE", f"/sessions/{sid}/recall")  # do not fire during the rest of the run
    return _done(start, ok, f"{recall.get('call_type')} recall due in {minutes:.1f} min, instruction "
                 f"{recall['additional_context_message'][:120]!r}; {t.brief()}", t,
                 allowed=frozenset({"schedule_recall"}))


async def greeting(env: Env) -> Outcome:
    """A greeting gets a friendly answer and no tool runs."""
    start = time.monotonic()
    t = await turn(env, new_session(env, "greeting"), "Hi!")
    ok = t.end == "stream_end" and bool(t.final.strip()) and not t.started and "{" not in t.final
    return _done(start, ok, t.brief(), t)


def _probe_seconds(env: Env) -> float:
    """Time for a 1-token completion: short only when the server is not busy generating."""
    body = json.dumps({"model": env.alias, "max_tokens": 1,
                       "messages": [{"role": "user", "content": "Say OK."}]}).encode()
    req = urllib.request.Request(env.model_url + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    start = time.monotonic()
    with urllib.request.urlopen(req, timeout=300) as resp:
        resp.read()
    return time.monotonic() - start


async def stop_midway(env: Env) -> Outcome:
    """Stop mid-generation: the turn ends stopped and the model server stops generating.

    The server runs one request at a time and does not interrupt it for another
    (``--interrupt_requests False``): a 1-token probe right after the stop answers in a
    few seconds only if the long answer is no longer being generated (it would take a minute).
    """
    start = time.monotonic()
    sid = new_session(env, "stop")
    t = await turn(env, sid, "Write a long story (at least 600 words) about a dragon who learns to bake bread.",
                   stop_after_deltas=15)
    stopped_at = time.monotonic()
    probe = await asyncio.to_thread(_probe_seconds, env)
    detail = get(env, f"/sessions/{sid}")
    saved = [m for m in detail.get("messages", []) if m.get("role") == "assistant"]
    ok = t.end == "stream_stopped" and probe < 15.0 and len(t.shown.split()) < 300
    return _done(start, ok, f"end={t.end}, {len(t.shown.split())} words shown, probe answered {probe:.1f} s after "
                 f"the stop (+{time.monotonic() - stopped_at - probe:.1f}), partial saved: {bool(saved)}; {t.brief()}", t)


async def todo_two_steps(env: Env) -> Outcome:
    """A two-step task with a todo list: the list exists and both steps' effects are stored."""
    start = time.monotonic()
    sid = new_session(env, "two steps")
    number = random.randint(100, 999)
    t = await turn(env, sid, "Make a todo list with two steps and then do them: "
                   f"1) find out today's date, 2) note down 'order {number} ships on <that date>'.")
    todo_file = env.session_files / sid / ".navi" / "todo.json"
    try:
        steps = json.loads(todo_file.read_text())
    except (OSError, ValueError):
        steps = []
    steps = steps.get("steps", steps) if isinstance(steps, dict) else steps
    today = datetime.now(UTC)
    date_forms = {f"{today:%Y-%m-%d}", f"{today:%B} {today.day}", f"{today.day} {today:%B}"}
    notes = [n for n in _notes(env) if str(number) in n["text"]]
    dated = [n for n in notes if any(f.lower() in n["text"].lower() for f in date_forms)]
    ok = t.end == "stream_end" and len(steps) >= 2 and bool(dated)
    return _done(start, ok, f"todo steps {len(steps)}; notes with {number}: {[n['text'] for n in notes][:2]}; "
                 f"dated: {bool(dated)}; {t.brief()}", t, allowed=frozenset({"todo", "user_notes"}))


async def subagent(env: Env) -> Outcome:
    """spawn_agent: a subagent reads a file in the session directory; the answer has its number."""
    start = time.monotonic()
    sid = new_session(env, "subagent")
    number = random.randint(1000, 9999)
    folder = env.session_files / sid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "facts.txt").write_text(f"The magic number is {number}.\n")
    t = await turn(env, sid, "Use a subagent (spawn_agent) to read the file facts.txt and tell me the magic number.")
    spawned = [c for c in t.calls("spawn_agent") if c["success"]]
    ok = t.end == "stream_end" and bool(spawned) and str(number) in t.final
    return _done(start, ok, f"number {number}; {t.brief()}", t, allowed=frozenset({"spawn_agent", READING}))


TASKS: dict[str, Callable[[Env], Awaitable[Outcome]]] = {
    "plain_question": plain_question,
    "what_time": what_time,
    "read_file": read_file,
    "write_note": write_note,
    "remember": remember,
    "remind_me": remind_me,
    "greeting": greeting,
    "stop_midway": stop_midway,
    "todo_two_steps": todo_two_steps,
    "subagent": subagent,
}


# -- the model server and a live Navi for it ----------------------------------------------------


def default_model_url() -> str:
    import os

    return os.environ.get("NAVI_REAL_MODEL_URL", "http://127.0.0.1:8089/v1").rstrip("/")


def model_aliases(url: str) -> list[str] | None:
    try:
        with urllib.request.urlopen(url + "/models", timeout=3) as resp:
            return [m["id"] for m in json.loads(resp.read()).get("data", [])]
    except (OSError, ValueError, KeyError):
        return None


def start_navi_for_model(tmp: Path, url: str, alias: str) -> LiveNavi:
    """A live Navi whose ``local_small`` profile talks to the model server at ``url``."""
    from tests.support.live import start_live_navi

    navi = start_live_navi(tmp, {
        "OPENAI_BASE_URL": url,
        "OLLAMA_HOST": "http://127.0.0.1:9",  # nothing may silently use an Ollama server
        "OLLAMA_NUM_CTX": "8192",  # the model server's n_ctx: compression and memory budgets follow it
        "LLM_STREAM_FIRST_CHUNK_TIMEOUT": "300",
        "LLM_STREAM_CHUNK_TIMEOUT": "120",
        "WS_HEARTBEAT_SECONDS": "10",
        "LLM_MAX_OUTPUT_TOKENS": "1024",  # a looping 0.5B model must not hold the only slot for minutes
        # The loop's own log lines (decision_unusable, answer_retried, call_doubted, …) with INFO.
        "LOG_LEVEL": os.environ.get("NAVI_BENCH_LOG_LEVEL", "WARNING"),
    })
    navi.manage("real_model", "profile", "--model", model_key(alias))
    return navi


def model_key(alias: str) -> str:
    from local_models.catalog import MODELS

    return next((m.key for m in MODELS.values() if m.alias == alias), "qwen")


def set_aids(navi: LiveNavi, alias: str, on: bool) -> None:
    navi.manage("real_model", "profile", "--model", model_key(alias), "--aids", "on" if on else "off")


# Benchmark modes: (aids, constrained decisions). "-<aid>" (e.g. "-doubts") is "constrained" with that one
# aid switched off, to measure its uplift.
MODES = {"on": ("on", "on"), "off": ("off", "on"), "constrained": ("on", "on"), "native": ("on", "off"),
         "bare": ("off", "off")}


def set_mode(navi: LiveNavi, alias: str, mode: str) -> None:
    off = mode[1:] if mode.startswith("-") else ""
    aids, constraints = MODES["constrained" if off else mode]
    navi.manage("real_model", "profile", "--model", model_key(alias), "--aids", aids, "--constraints", constraints,
                "--aids-off", off)
