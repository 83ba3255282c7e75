"""Recall lateness benchmark (issue 7): how late do scheduled recalls start, idle and under load?

    .venv/bin/python bench/recall_lateness.py [--tier embedded|scaleout] [--mode idle,load]
        [--recalls 200] [--spread 180] [--load 20] [--env NAME=VALUE ...]

The real `manage.py start` (plus `celery worker` and `celery beat` in scale-out) and a fake Ollama
that answers by what it is asked: the planner "DIRECT", a "BENCH-SCHEDULE <iso>" message a
``schedule_recall`` call for that time, a recall's turn at once, a "BENCH-LOAD" message a paced
stream of ~5 s. Per mode: ``--recalls`` sessions each get one ``once`` recall, due times spread
evenly over ``--spread`` seconds, scheduled by the model through the tool (so the ETA task is
sent by the server, as in real use); in "load" mode ``--load`` other sessions stream
continuously (POST /sessions/{id}/messages in a loop) the whole time.

Lateness = actual start - due time, measured twice: ``claim`` (RecallRun.started_at, when a
worker claimed the occurrence) and ``model`` (when the recall turn's first model request
reached the fake server: claim + run start-up + planner). Duplicates: occurrences with more
than one non-deferred RecallRun row, and recall turns the model answered more than once.
Targets: p99 < 2 s idle, < 5 s under load; zero duplicates.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import percentile  # noqa: E402
from tests.fakes.fake_llm import FakeLLMServer  # noqa: E402
from tests.fakes.wire import Reply  # noqa: E402

PLANNER_MARK = "exactly the single word: DIRECT"
SCHEDULE = re.compile(r"BENCH-SCHEDULE (\d+) (\S+)")
RECALL = re.compile(r"BENCH-RECALL (\d+)")
LOAD_REPLY = Reply(text="Streaming under load. " * 18, token_size=4, delay_between_chunks=0.05)  # ~100 chunks, 5 s


class BenchModel(FakeLLMServer):
    """The fake Ollama, answering by the request instead of from a FIFO script."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.recall_seen: dict[int, float] = {}  # recall number -> first answer request (wall clock)
        self.recall_answers: Counter[int] = Counter()
        self.load_turns = 0

    def reset_counts(self) -> None:
        with self.lock:
            self.recall_seen.clear()
            self.recall_answers.clear()
            self.load_turns = 0
            self.requests = []

    def _reply(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        if PLANNER_MARK in json.dumps(messages):
            return Reply(text="DIRECT")
        turn = [m for m in messages if m.get("role") != "system"]  # the agent appends budget notes
        last = turn[-1] if turn else {}
        if last.get("role") == "tool":
            return Reply(text="Scheduled.")
        content = str(last.get("content") or "")
        if m := RECALL.search(content):
            with self.lock:
                self.recall_seen.setdefault(int(m.group(1)), time.time())
                self.recall_answers[int(m.group(1))] += 1
            return Reply(text="Done: nothing to report.")
        if m := SCHEDULE.search(content):
            args = {"call_type": "once", "when": m.group(2),
                    "additional_context_message": f"BENCH-RECALL {m.group(1)}: read /tmp/bench.log with filesystem."}
            return Reply(tool_calls=({"name": "schedule_recall", "arguments": args},))
        if "BENCH-LOAD" in content:
            with self.lock:
                self.load_turns += 1
            return LOAD_REPLY
        return Reply(text="Hello from the benchmark model.")

    async def _chat(self, ollama: bool, body: dict[str, Any], reader: Any, writer: Any, generation: int) -> None:
        # popleft() in the parent happens before its first await: this reply is the one it takes
        self.replies.appendleft(self._reply(body if isinstance(body, dict) else {}))
        await super()._chat(ollama, body, reader, writer, generation)


def _sessions(live: Any, n: int, title: str) -> list[str]:
    out = []
    for i in range(n):
        status, body = live.request("POST", "/sessions", {"title": f"{title} {i}"})
        assert status == 201, body
        out.append(str(body["session_id"]))
    return out


def _load_loop(live: Any, sid: str, stop: threading.Event, errors: list[str]) -> None:
    while not stop.is_set():
        status, body = live.request("POST", f"/sessions/{sid}/messages", {"content": "BENCH-LOAD stream please"})
        if status != 200:
            errors.append(f"{status} {body}")
            time.sleep(0.5)


def run_mode(live: Any, model: BenchModel, *, mode: str, recalls: int, spread: float, load: int,
             lead: float) -> dict[str, Any]:
    model.reset_counts()
    sids = _sessions(live, recalls, f"recall bench {mode}")
    stop = threading.Event()
    load_errors: list[str] = []
    loaders = []
    if mode == "load":
        for sid in _sessions(live, load, "load"):
            t = threading.Thread(target=_load_loop, args=(live, sid, stop, load_errors), daemon=True)
            t.start()
            loaders.append(t)
    first_due = int(time.time() + lead) + 1
    dues = [first_due + spread * i / max(recalls - 1, 1) for i in range(recalls)]
    whens = [datetime.fromtimestamp(d, UTC).replace(microsecond=0) for d in dues]

    def schedule(i: int) -> None:
        status, body = live.request("POST", f"/sessions/{sids[i]}/messages",
                                    {"content": f"BENCH-SCHEDULE {i} {whens[i].isoformat()}"})
        assert status == 200, body

    t0 = time.time()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(schedule, range(recalls)))
    scheduled_in = time.time() - t0
    if time.time() > first_due:
        print(f"  WARNING: scheduling took {scheduled_in:.1f} s, past the first due time; raise --lead", flush=True)
    deadline = max(dues) + 60
    while time.time() < deadline:
        with model.lock:
            seen = len(model.recall_seen)
        if seen >= recalls:
            break
        time.sleep(0.5)
    time.sleep(3)  # a duplicate firing would show up by now
    stop.set()
    for t in loaders:
        t.join(30)
    claim_late: list[float] = []
    slow: list[tuple[float, float]] = []  # (due - first due, claim lateness) of the late ones
    outcomes: Counter[str] = Counter()
    dup_rows = 0
    for sid in sids:
        status, body = live.request("GET", f"/sessions/{sid}/recalls")
        for recall in body["recalls"]:
            runs = [r for r in recall["runs"] if r["outcome"] != "deferred"]
            outcomes.update(r["outcome"] for r in recall["runs"])
            per_due = Counter(r["due_at"] for r in runs)
            dup_rows += sum(c - 1 for c in per_due.values() if c > 1)
            for r in runs:
                late = (datetime.fromisoformat(r["started_at"]) - datetime.fromisoformat(r["due_at"])).total_seconds()
                claim_late.append(late)
                if late > 0.5:
                    slow.append((datetime.fromisoformat(r["due_at"]).timestamp() - first_due, late))
    with model.lock:
        model_late = [model.recall_seen[i] - whens[i].timestamp() for i in model.recall_seen]
        dup_answers = sum(c - 1 for c in model.recall_answers.values() if c > 1)
        load_turns = model.load_turns
    return {"mode": mode, "recalls": recalls, "scheduled_in": scheduled_in, "claim": claim_late,
            "model": model_late, "dup_rows": dup_rows, "dup_answers": dup_answers, "outcomes": dict(outcomes),
            "missing": recalls - len(model_late), "slow": sorted(slow), "load_turns": load_turns, "load_errors": load_errors[:3]}


def _fmt(values: list[float]) -> str:
    if not values:
        return "n/a"
    return (f"p50={percentile(values, 50):6.3f} s p99={percentile(values, 99):6.3f} s "
            f"max={max(values):6.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=["embedded", "scaleout"], default="embedded")
    parser.add_argument("--mode", default="idle,load", help="comma-separated: idle, load")
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--spread", type=float, default=180.0, help="seconds the due times are spread over")
    parser.add_argument("--load", type=int, default=20, help="sessions streaming continuously in 'load' mode")
    parser.add_argument("--lead", type=float, default=25.0, help="seconds from the start of scheduling to the first due")
    parser.add_argument("--verbose", action="store_true", help="list the recalls that started > 0.5 s late")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server (repeatable)")
    args = parser.parse_args()
    from tests.support.live import start_live_navi

    model = BenchModel().start()
    env = {"OLLAMA_HOST": model.url, "LOG_LEVEL": "ERROR", **dict(kv.split("=", 1) for kv in args.env)}
    live = start_live_navi(Path(tempfile.mkdtemp(prefix="navi-bench-recall-")), env, tier=args.tier)
    print(f"tier={args.tier} recalls={args.recalls} over {args.spread:.0f} s {' '.join(args.env)}", flush=True)
    try:
        for mode in args.mode.split(","):
            r = run_mode(live, model, mode=mode, recalls=args.recalls, spread=args.spread, load=args.load,
                         lead=args.lead)
            extra = f" load turns={r['load_turns']}" if mode == "load" else ""
            if r["load_errors"]:
                extra += f" load errors: {r['load_errors']}"
            print(f"[{args.tier} {mode:4s}] claim lateness {_fmt(r['claim'])} | model lateness {_fmt(r['model'])} | "
                  f"duplicates rows={r['dup_rows']} answers={r['dup_answers']} missing={r['missing']} "
                  f"outcomes={r['outcomes']} (scheduled in {r['scheduled_in']:.1f} s){extra}", flush=True)
            if args.verbose and r["slow"]:
                print("  late (> 0.5 s) at due+offset: " + ", ".join(f"+{d:.0f}s:{x:.2f}" for d, x in r["slow"]))
    finally:
        live.stop()
        model.stop()


if __name__ == "__main__":
    main()
