"""Chaos run (by hand, minutes): SIGKILL the server at random points of turns with tools, N times.

    .venv/bin/python bench/chaos.py --runs 20 [--tier embedded|scaleout] [--seed 1]

Each run: a new session; the (fake) model calls ``mark_and_wait`` (appends the session's id to
side_effects.log, then waits 0.2-1.5 s), then streams a ~1.5 s answer. After a random 0.2-4 s the
server gets SIGKILL, is started again on the same data, and the session's history is read back.

Reported: runs, kills (mid-turn / after the turn had ended / before the client saw any work: the
message may not have reached the server, so its absence is no loss), losses — a user message missing, a
tool result the client saw but the history lacks, an answer the client saw end but not saved, or
a saved partial answer shorter than what the client had minus ~1 s of streaming (must be 0) —,
duplicated side effects (a tool run twice for one call; must be 0), turns left unmarked (a cut
turn whose user message is not marked interrupted; must be 0), and restart times.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import percentile  # noqa: E402

ANSWER = "The fox folded the map, thanked the heron and walked home along the river bank. " * 3


async def one_run(live: Any, fake: Any, tmp: Path, rng: random.Random, stats: dict[str, Any]) -> None:
    from tests.support.live import kill_server, restart_server
    from tests.transport.wsclient import Client

    status, out = live.request("POST", "/sessions", {"title": "chaos"})
    assert status == 201, out
    sid = str(out["session_id"])
    fake.reset()
    fake.script(text="DIRECT")
    fake.script(text="Marking.", tool_calls=[{"name": "mark_and_wait",
                                              "arguments": {"label": sid, "seconds": round(rng.uniform(0.2, 1.5), 2)}}])
    fake.script(text=ANSWER, token_size=4, delay_between_chunks=0.03)
    ws = await Client.open(live.ws_url(sid))
    await ws.recv()  # session_sync
    await ws.send({"type": "message", "content": "Mark it, then tell me how the story ends"})
    seen: dict[str, Any] = {"text": "", "tool_results": 0, "ended": False, "working": False}
    kill_at = time.monotonic() + rng.uniform(0.2, 4.0)
    while time.monotonic() < kill_at:
        try:
            event = await ws.recv(max(0.01, kill_at - time.monotonic()))
        except Exception:  # noqa: BLE001 - the timeout: time to kill
            break
        if event["type"] in ("stream_delta", "tool_started", "thinking", "plan"):
            seen["working"] = True  # the agent saved the user message before doing anything
        if event["type"] == "stream_delta":
            seen["text"] += event["delta"]
        elif event["type"] == "tool_call" and event.get("result"):
            seen["tool_results"] += 1
        elif event["type"] == "stream_end":
            seen["ended"] = True
    await asyncio.to_thread(kill_server, live)
    await ws.close()
    started = time.monotonic()
    await asyncio.to_thread(restart_server, live, tmp)
    stats["restart_s"].append(time.monotonic() - started)
    stats["runs"] += 1
    stats["kills_after_turn" if seen["ended"] else "kills_mid_turn" if seen["working"]
          else "kills_before_work_seen"] += 1
    status, detail = live.request("GET", f"/sessions/{sid}")
    messages = detail["messages"]
    users = [m for m in messages if m["role"] == "user"]
    tools = [m for m in messages if m["role"] == "tool" and m["content"] == "marked"]
    answers = [m for m in messages if m["role"] == "assistant" and not m.get("tool_calls")]
    saved = answers[-1]["content"] if answers else ""
    lost = []
    if len(users) > 1 or (seen["working"] and not users):  # unseen work: it may not have reached the server
        lost.append("user message")
    if seen["tool_results"] > len(tools):
        lost.append("tool result")
    if seen["ended"] and saved != ANSWER:
        lost.append("finished answer")
    if not seen["ended"] and len(seen["text"]) - len(saved) > 140:  # ~1 s at ~130 characters/s
        lost.append(f"partial answer ({len(seen['text'])} seen, {len(saved)} saved)")
    if lost:
        stats["losses"] += 1
        stats["loss_detail"].append({"session": sid, "lost": lost})
    if not seen["ended"] and users and not users[0]["interrupted"] and saved != ANSWER:
        stats["unmarked"] += 1
    log = tmp / "data" / "tools" / "side_effects.log"
    marks = log.read_text().splitlines().count(sid) if log.exists() else 0
    if marks > 1:
        stats["duplicated_side_effects"] += marks - 1


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tier", default=os.environ.get("NAVI_TEST_TIER", "embedded"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "navi_site.settings")
    from tests.fakes.fake_llm import shared_server
    from tests.faults.conftest import MARK_TOOL
    from tests.support.live import start_live_navi

    fake = shared_server()
    tmp = Path(tempfile.mkdtemp(prefix="navi-chaos-"))
    (tmp / "data" / "tools").mkdir(parents=True)
    (tmp / "data" / "tools" / "mark_and_wait.py").write_text(MARK_TOOL)
    (tmp / "data" / "tools" / "enabled.json").write_text(json.dumps(["mark_and_wait"]))
    if args.tier == "embedded":  # migrate first: on a busy machine it can outlast start-up's health wait
        import subprocess

        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
        env.update({"NAVI_DATA_DIR": str(tmp / "data"), "SESSION_FILES_DIR": str(tmp / "session_files")})
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)  # noqa: ASYNC221
    live = start_live_navi(tmp, {"OLLAMA_HOST": fake.url, "OPENAI_BASE_URL": fake.url + "/v1"}, tier=args.tier)
    rng = random.Random(args.seed)
    stats: dict[str, Any] = {"runs": 0, "kills_mid_turn": 0, "kills_after_turn": 0, "kills_before_work_seen": 0, "losses": 0, "unmarked": 0,
                             "duplicated_side_effects": 0, "restart_s": [], "loss_detail": []}
    try:
        for _ in range(args.runs):
            await one_run(live, fake, tmp, rng, stats)
    finally:
        live.stop()
    restarts = stats.pop("restart_s")
    print(f"tier={args.tier} seed={args.seed}")
    print(json.dumps(stats, indent=1))
    print(f"restart seconds: p50={percentile(restarts, 50):.1f} p95={percentile(restarts, 95):.1f}")
    if stats["losses"] or stats["duplicated_side_effects"] or stats["unmarked"]:
        sys.exit(1)


if __name__ == "__main__":
    asyncio.run(main())
