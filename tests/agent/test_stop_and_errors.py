"""Stop at every stage, broken model servers, tool failures, max_iterations."""
from __future__ import annotations

import time

import pytest

from tests.support.agent_env import types

pytestmark = pytest.mark.django_db(transaction=True)


async def _timed(agent_env, text: str, stop) -> tuple[list[dict], float]:
    """The turn's events, and how long the turn went on after Stop."""
    events = await agent_env.run(text, stop_event=stop)
    return events, time.monotonic() - stop.fired_at


async def test_stop_during_prefill_closes_the_connection(agent_env, stop_after) -> None:
    agent_env.fake.script(hang_before_first_chunk=20, text="never")
    asked = lambda: len(agent_env.fake.chat_requests) >= 1  # noqa: E731
    events, elapsed = await _timed(agent_env, "slow please", stop_after(0.3, once=asked))
    assert types(events) == ["stream_stopped"]
    assert elapsed < 1.2
    assert await agent_env.fake.wait_for(lambda f: f.closed_by_client >= 1, within=2)


async def test_stop_during_thinking(agent_env, stop_after) -> None:
    agent_env.fake.script(thinking="x" * 400, text="answer", token_size=2, delay_between_chunks=0.02)
    events, elapsed = await _timed(agent_env, "think", stop_after(0.4))
    assert types(events)[-1] == "stream_stopped" and elapsed < 1.2


async def test_stop_during_text_saves_partial_text(agent_env, stop_after) -> None:
    agent_env.fake.script(text="word " * 300, token_size=5, delay_between_chunks=0.01)
    events, elapsed = await _timed(agent_env, "talk", stop_after(0.5))
    assert types(events) == ["stream_delta", "stream_stopped"] and elapsed < 1.2
    shown = "".join(e["delta"] for e in events if e["type"] == "stream_delta").strip()
    rows = await agent_env.messages()
    assert rows[-1].role == "assistant" and rows[-1].content == shown and rows[-1].metadata == {"stopped": True}
    assert 0 < len(shown) < len("word " * 300)


async def test_stop_during_a_tool(agent_env, settings, stop_after) -> None:
    (settings.TOOLS_DIR / "slow.py").write_text(
        'import asyncio\nname = "slow"\ndescription = "Sleeps."\n'
        'parameters = {"type": "object", "properties": {}}\n\n'
        'async def execute(params):\n    await asyncio.sleep(30)\n    return "woke"\n'
    )
    (settings.TOOLS_DIR / "enabled.json").write_text('["slow"]')
    from tools_app.registry import reset_registry

    reset_registry()
    agent_env.fake.script(tool_calls=[{"name": "slow", "arguments": {}}])
    asked = lambda: len(agent_env.fake.chat_requests) >= 1  # noqa: E731
    events, elapsed = await _timed(agent_env, "run slow", stop_after(0.3, once=asked))
    assert types(events) == ["tool_started", "tool_call", "stream_stopped"]
    assert events[1]["success"] is False and "stopped" in events[1]["result"]
    assert elapsed < 1.2 + 1.0  # one poll + the grace period for the tool


async def test_stop_during_a_subagent(agent_env, stop_after) -> None:
    agent_env.fake.script(tool_calls=[{"name": "spawn_agent", "arguments": {"task": "think long"}}])
    agent_env.fake.script(hang_before_first_chunk=20, text="late")
    subagent_asked = lambda: len(agent_env.fake.chat_requests) >= 2  # noqa: E731
    events, elapsed = await _timed(agent_env, "delegate", stop_after(0.2, once=subagent_asked))
    assert types(events)[0] == "tool_started" and types(events)[-1] == "stream_stopped"
    assert elapsed < 1.2


async def test_model_server_dies_mid_stream(agent_env) -> None:
    agent_env.fake.script(text="partial answer " * 20, drop_after_chunks=3)
    events = await agent_env.run("go")
    assert events[-1]["type"] == "error"
    assert "connection" in events[-1]["message"].lower() or "closed" in events[-1]["message"].lower()


async def test_malformed_ndjson_lines_are_skipped(agent_env) -> None:
    agent_env.fake.script(text="Still fine.", malformed_lines=True)
    events = await agent_env.run("go")
    assert types(events) == ["stream_delta", "stream_end"] and events[-1]["content"] == "Still fine."


async def test_first_chunk_timeout(agent_env, settings) -> None:
    settings.LLM_STREAM_FIRST_CHUNK_TIMEOUT = 0.4
    agent_env.fake.script(hang_before_first_chunk=5, text="late")
    events = await agent_env.run("go")
    assert events[-1]["type"] == "error" and "LLM_STREAM_FIRST_CHUNK_TIMEOUT" in events[-1]["message"]


async def test_chunk_timeout(agent_env, settings) -> None:
    settings.LLM_STREAM_CHUNK_TIMEOUT = 0.4
    agent_env.fake.script(text="abcdefghij" * 5, stall_after_chunks=2, stall_seconds=5)
    events = await agent_env.run("go")
    assert events[-1]["type"] == "error" and "LLM_STREAM_CHUNK_TIMEOUT" in events[-1]["message"]


async def test_unknown_model_says_how_to_fix(agent_env) -> None:
    agent_env.fake.known_models = {"other-model"}
    events = await agent_env.run("go")
    assert events[-1]["type"] == "error"
    assert "ollama pull fake-model" in events[-1]["message"]


async def test_unreachable_server_names_the_address(agent_env, settings) -> None:
    settings.OLLAMA_HOST = "http://127.0.0.1:9"
    events = await agent_env.run("go")
    assert events[-1]["type"] == "error" and "127.0.0.1:9" in events[-1]["message"]
    # The user's message is kept; the next turn works.
    settings.OLLAMA_HOST = agent_env.fake.url
    agent_env.fake.script(text="Back.")
    assert (await agent_env.run("again"))[-1]["content"] == "Back."


async def test_tool_raising_is_a_result_and_the_loop_continues(agent_env, settings) -> None:
    (settings.TOOLS_DIR / "boom.py").write_text(
        'name = "boom"\ndescription = "Fails."\nparameters = {"type": "object", "properties": {}}\n\n'
        'async def execute(params):\n    raise RuntimeError("disk on fire")\n'
    )
    (settings.TOOLS_DIR / "enabled.json").write_text('["boom"]')
    from tools_app.registry import reset_registry

    reset_registry()
    agent_env.fake.script(tool_calls=[{"name": "boom", "arguments": {}}])
    agent_env.fake.script(text="The tool failed, sorry.")
    events = await agent_env.run("go")
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["success"] is False and "disk on fire" in call["result"]
    assert events[-1] == {**events[-1], "type": "stream_end", "content": "The tool failed, sorry."}
    tool_msg = [m for m in agent_env.requests()[1]["messages"] if m["role"] == "tool"][0]
    assert "disk on fire" in tool_msg["content"]


async def test_unknown_tool_and_invalid_arguments_are_told_to_the_model(agent_env) -> None:
    agent_env.fake.script(tool_calls=[{"name": "teleport", "arguments": {}}])
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": "{not json"}])
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "fly"}}])
    agent_env.fake.script(text="OK, done.")
    events = await agent_env.run("go")
    results = [e["result"] for e in events if e["type"] == "tool_call"]
    assert "unknown tool 'teleport'" in results[0] and "todo" in results[0]
    assert "not valid" in results[1]
    assert "action" in results[2]
    assert events[-1]["type"] == "stream_end"


async def test_max_iterations_ends_with_a_clear_message(agent_env) -> None:
    await agent_env.set_profile(max_iterations=2)
    agent_env.fake.default_reply = agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    agent_env.fake.script(tool_calls=[{"name": "reflect", "arguments": {"progress": "some"}}])
    events = await agent_env.run("loop forever")
    assert events[-1]["type"] == "stream_end"
    assert "max_iterations = 2" in events[-1]["content"]
    assert len(agent_env.requests()) == 2


async def test_interrupted_turn_never_sends_an_orphan_tool_call(agent_env) -> None:
    from asgiref.sync import sync_to_async

    from sessions_app.services import message_append

    await sync_to_async(message_append)(session_id=agent_env.session_id, role="user", content="old question")
    await sync_to_async(message_append)(
        session_id=agent_env.session_id, role="assistant", content=None,
        tool_calls=[{"id": "call_dead", "name": "todo", "arguments": {"action": "read"}}],
    )
    agent_env.fake.script(text="Fresh answer.")
    events = await agent_env.run("new question")
    assert events[-1]["content"] == "Fresh answer."
    sent = agent_env.requests()[0]["messages"]
    idx = next(i for i, m in enumerate(sent) if m.get("tool_calls"))
    assert sent[idx + 1]["role"] == "tool" and "interrupted" in sent[idx + 1]["content"]
