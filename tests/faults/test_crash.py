"""The server dies mid-turn (Ctrl-C, SIGKILL), both tiers: after a restart the partial answer is in
the history marked interrupted, a tool that was running is answered "not run again" and is not run
again, and the server answers the next message."""
from __future__ import annotations

import asyncio
import signal
from typing import Any

from sessions_app.turns import TOOL_INTERRUPTED
from tests.faults.conftest import Stack, collect_text, wait_for_event
from tests.support.live import kill_server, restart_server

STORY = "Once upon a time a fox found a map of the forest and followed it to the river. " * 4


def _script_answer(fake: Any, **reply: Any) -> None:
    fake.script(text="DIRECT")  # the planner: no plan
    fake.script(**reply)


async def test_ctrl_c_mid_stream_keeps_the_partial_answer(stack: Stack, fake_ollama: Any) -> None:
    sid = stack.session("Ctrl-C")
    ws = await stack.idle_socket(sid)
    _script_answer(fake_ollama, text=STORY, token_size=4, delay_between_chunks=0.04)  # ~3 s of streaming
    await ws.send({"type": "message", "content": "Tell me a story"})
    seen = await collect_text(ws, at_least=20, streamed_for=1.3)
    await asyncio.to_thread(kill_server, stack.navi, signal.SIGINT)
    await ws.close()
    await asyncio.to_thread(restart_server, stack.navi, stack.tmp)
    messages = stack.messages(sid)
    assert [(m["role"], m["interrupted"]) for m in messages] == [("user", True), ("assistant", True)]
    saved = messages[-1]["content"]
    assert saved.startswith(seen.text.strip()) and STORY.startswith(saved)  # Ctrl-C writes the last second too
    await _answers_again(stack, fake_ollama, sid)


async def test_sigkill_mid_stream_loses_at_most_the_last_second(stack: Stack, fake_ollama: Any) -> None:
    sid = stack.session("SIGKILL")
    ws = await stack.idle_socket(sid)
    _script_answer(fake_ollama, text=STORY, token_size=4, delay_between_chunks=0.04)
    await ws.send({"type": "message", "content": "Tell me a story"})
    seen = await collect_text(ws, at_least=20, streamed_for=2.2)
    await asyncio.to_thread(kill_server, stack.navi)
    await ws.close()
    await asyncio.to_thread(restart_server, stack.navi, stack.tmp)
    messages = stack.messages(sid)
    assert [(m["role"], m["interrupted"]) for m in messages] == [("user", True), ("assistant", True)]
    saved = messages[-1]["content"]
    assert saved and STORY.startswith(saved)
    lost_seconds = (len(seen.text) - len(saved)) / seen.chars_per_second  # what the client had, not saved
    assert lost_seconds < 1.5, (len(seen.text), len(saved), seen.chars_per_second)
    await _answers_again(stack, fake_ollama, sid)


async def test_sigkill_during_a_tool_never_runs_it_again(stack: Stack, fake_ollama: Any) -> None:
    sid = stack.session("Tool")
    ws = await stack.idle_socket(sid)
    marks = len(stack.side_effects())
    _script_answer(fake_ollama, text="Marking it now.",
                   tool_calls=[{"name": "mark_and_wait", "arguments": {"label": sid}}])
    await ws.send({"type": "message", "content": "Mark it"})
    await wait_for_event(ws, "tool_started")
    for _ in range(100):
        if len(stack.side_effects()) > marks:
            break
        await asyncio.sleep(0.05)
    await asyncio.to_thread(kill_server, stack.navi)
    await ws.close()
    asked = len(fake_ollama.chat_requests)
    await asyncio.to_thread(restart_server, stack.navi, stack.tmp)
    await asyncio.sleep(1.0)
    assert stack.side_effects()[marks:] == [sid]  # ran once, not again after the restart
    assert len(fake_ollama.chat_requests) == asked  # and the turn was not resumed behind the user's back
    messages = stack.messages(sid)
    assert [(m["role"], m["interrupted"]) for m in messages] == [
        ("user", True), ("assistant", False), ("tool", False), ("assistant", True)]
    assert messages[1]["tool_calls"][0]["name"] == "mark_and_wait"
    assert messages[2]["content"] == TOOL_INTERRUPTED
    await _answers_again(stack, fake_ollama, sid)


async def _answers_again(stack: Stack, fake: Any, sid: str) -> None:
    ws = await stack.idle_socket(sid)
    _script_answer(fake, text="Back again.")
    await ws.send({"type": "message", "content": "Are you there?"})
    events = await ws.until("session_sync", timeout=20)
    assert [e for e in events if e["type"] == "stream_end"][0]["content"] == "Back again."
    await ws.close()
