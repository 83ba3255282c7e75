"""The agent core runs on its ports alone: a whole turn in a fresh process with no Django app set up,
only the scripted doubles of ``agent.testing`` plugged in. What the AST check of
test_import_boundaries cannot see (an import by name at run time) shows up here as a loaded module."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import asyncio, json, sys
from django.conf import settings

settings.configure(  # the values the core reads; no INSTALLED_APPS, no database, django.setup() never runs
    OLLAMA_DEFAULT_MODEL="m", OLLAMA_NUM_CTX=8192, OLLAMA_THINK=False, NAVI_PERSONA="You are Navi.",
    LLM_STREAM_FIRST_CHUNK_TIMEOUT=5, LLM_STREAM_CHUNK_TIMEOUT=5, LLM_STREAM_POLL_INTERVAL=0.05,
    LLM_LOCAL_MODEL_AIDS=False, LLM_MAX_OUTPUT_TOKENS=512, CONTEXT_COMPRESSION_ENABLED=False,
    CONTEXT_COMPRESSION_THRESHOLD=0.8, CONTEXT_KEEP_RECENT=10, CONTEXT_SUMMARY_TEMPERATURE=0.3,
)

from agent import testing
from agent.llm.registry import register_backend
from agent.loop import Agent

backend = testing.ScriptedBackend([
    testing.reply(calls=[("add", {"a": 2, "b": 3})]),
    testing.reply(calls=[("broken", {})]),
    testing.reply("2 + 3 is 5."),
])
register_backend("scripted", lambda: backend)
tools = testing.Tools({"add": lambda a: a["a"] + a["b"], "broken": lambda a: 1 / 0})
profile = testing.quiet_profile(llm_backend="scripted", enabled_tools=("add", "broken"))
memory = testing.Memory({1: "The user likes short answers."})

async def main():
    with testing.plugged(profiles=testing.Profiles(profile), tools=tools, memory=memory) as store:
        sid = store.create(profile_id="test")
        events = [e.to_dict() async for e in Agent(store=store).run_stream(sid, "What is 2 + 3?")]
        return {
            "events": [(e["type"], e.get("tool"), e.get("success")) for e in events
                       if e["type"] in ("tool_call", "stream_end", "error")],
            "final": events[-1].get("content"),
            "tool_calls": tools.calls,
            "display": [(m.role, m.name, m.content) for m in store.display(sid)],
            "memory_in_prompt": "short answers" in str(backend.requests[0]["messages"]),
            "offered": backend.requests[0]["tools"],
            "apps_loaded": sorted(m for m in sys.modules if m.split(".")[0] in (
                "sessions_app", "tools_app", "memory_app", "recall_app", "profiles_app", "local_models")),
            "orm_loaded": "django.db.models" in sys.modules,
        }

print(json.dumps(asyncio.run(main())))
'''


def test_a_turn_runs_on_the_ports_alone_with_no_app_loaded():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["events"] == [["tool_call", "add", True], ["tool_call", "broken", False], ["stream_end", None, None]]
    assert out["final"] == "2 + 3 is 5."
    assert out["tool_calls"] == [["add", {"a": 2, "b": 3}], ["broken", {}]]
    assert out["display"][0] == ["user", None, "What is 2 + 3?"]
    assert ["tool", "add", "5"] in out["display"]
    assert any(role == "tool" and name == "broken" and "division by zero" in text
               for role, name, text in out["display"])
    assert out["display"][-1] == ["assistant", None, "2 + 3 is 5."]
    assert out["memory_in_prompt"] is True
    assert out["offered"] == ["add", "broken"]
    assert out["apps_loaded"] == [] and out["orm_loaded"] is False
