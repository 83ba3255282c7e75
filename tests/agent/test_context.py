"""Context builder, memory hook, compression, image injection, saving as it happens."""
from __future__ import annotations

import base64

import pytest
from asgiref.sync import sync_to_async

from agent import ports
from agent.context import ContextBuilder
from agent.llm.base import ChatMessage
from agent.profiles import ProfileSpec

pytestmark = pytest.mark.django_db(transaction=True)


def test_system_prompt_is_persona_dash_profile_and_cached() -> None:
    builder = ContextBuilder()
    profile = ProfileSpec(id="p", name="P", system_prompt="Domain rules.")
    history = [ChatMessage(role="system", content="stale"), ChatMessage(role="user", content="hi")]
    msgs = builder.build(profile=profile, persona="I am Navi.", memory=None, history=history)
    assert msgs[0].role == "system" and msgs[0].content.startswith("I am Navi.\n\n---\n\nDomain rules.")
    assert [m.role for m in msgs] == ["system", "user"]  # stored system messages are stripped
    first = builder.system_prompt(profile, persona="I am Navi.")
    assert builder.system_prompt(profile, persona="I am Navi.") is first  # cached
    edited = ProfileSpec(id="p", name="P", system_prompt="New rules.")
    assert "New rules." in builder.system_prompt(edited, persona="I am Navi.")
    builder.invalidate("p")
    assert builder._cache == {}


async def test_memory_summary_is_injected_fresh_every_turn(agent_env) -> None:
    summaries = iter(["Lives in Porto.", "Lives in Lisbon now."])

    class Provider:
        async def summary_for(self, user_id: int) -> str | None:
            return next(summaries)

    previous = ports.memory()
    ports.provide(memory=Provider())
    try:
        for _ in range(2):
            agent_env.fake.script(text="ok")
            await agent_env.run("where do I live?")
    finally:
        ports.provide(memory=previous)
    first, second = (r["messages"] for r in agent_env.requests())
    assert first[1] == {**first[1], "role": "system", "content": "## What I remember about the user\n\nLives in Porto."}
    assert second[1]["content"].endswith("Lives in Lisbon now.")
    assert first[0]["role"] == "system" and "You test things." in first[0]["content"]
    assert first[2]["role"] == "user"


async def test_compression_replaces_context_not_display(agent_env, settings) -> None:
    from sessions_app.models import Session
    from sessions_app.services import message_append

    settings.CONTEXT_KEEP_RECENT = 1
    settings.OLLAMA_NUM_CTX = 1000
    for i in range(3):
        await sync_to_async(message_append)(session_id=agent_env.session_id, role="user", content=f"question {i}")
        await sync_to_async(message_append)(session_id=agent_env.session_id, role="assistant", content=f"answer {i}")
    await sync_to_async(Session.objects.filter(pk=agent_env.session_id).update)(context_token_count=900)
    agent_env.fake.script(text="- user asked three questions")  # the summary
    agent_env.fake.script(text="Fresh answer.", prompt_eval_count=40, eval_count=5)
    events = await agent_env.run("question 3")
    assert events[0]["type"] == "context_compressed"
    assert events[0]["messages_before"] == 7 and events[0]["messages_after"] == 2
    summary_req = agent_env.requests()[0]
    assert summary_req.get("think") in (False, None) and not summary_req.get("tools")
    assert "User: question 0" in summary_req["messages"][1]["content"]
    ctx = await agent_env.messages("context")
    assert ctx[0].is_summary and ctx[0].role == "user" and "three questions" in ctx[0].content
    assert [m.content for m in ctx[1:]] == ["question 3", "Fresh answer."]
    display = await agent_env.messages()
    assert len(display) == 8 and not any(m.is_summary for m in display)
    assert events[-1]["type"] == "stream_end" and events[-1]["context_tokens"] == 45


def test_compression_never_splits_a_tool_group() -> None:
    from agent.compression import format_old, split_turns
    from agent.llm.base import ToolCallRequest
    from agent.store import StoredMessage

    msgs = [
        ChatMessage(role="user", content="q1"),
        ChatMessage(role="assistant", tool_calls=(ToolCallRequest(id="a", name="t", arguments={"x": "y" * 500}),)),
        ChatMessage(role="tool", tool_call_id="a", name="t", content="r" * 1000),
        ChatMessage(role="assistant", content="a1"),
        ChatMessage(role="user", content="q2"),
        ChatMessage(role="assistant", tool_calls=(ToolCallRequest(id="b", name="t", arguments={}),)),
        ChatMessage(role="tool", tool_call_id="b", name="t", content="r2"),
    ]
    stored = [StoredMessage(seq=i, message=m) for i, m in enumerate(msgs)]
    split = split_turns(stored, keep_recent=1)
    assert [s.seq for s in split.old] == [0, 1, 2, 3] and [s.seq for s in split.recent] == [4, 5, 6]
    text = format_old(split.old)
    call_line = next(line for line in text.splitlines() if line.startswith("Tool call"))
    result_line = next(line for line in text.splitlines() if line.startswith("Tool result"))
    assert len(call_line) <= len("Tool call t()") + 120 and len(result_line) <= len("Tool result t: ") + 300
    big = [StoredMessage(seq=i, message=ChatMessage(role="user", content="x" * 5000)) for i in range(10)]
    assert len(format_old(big)) <= 12_000


async def test_image_tool_adds_a_context_only_user_message(agent_env, settings) -> None:
    from sessions_app.services import session_files_dir

    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
    folder = session_files_dir(agent_env.session_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dot.png").write_bytes(png)
    agent_env.fake.script(tool_calls=[{"name": "image_view", "arguments": {"path": "dot.png"}}])
    agent_env.fake.script(text="A single dot.")
    events = await agent_env.run("what is in dot.png?")
    assert next(e for e in events if e["type"] == "tool_call")["success"] is True
    second = agent_env.requests()[1]["messages"]
    assert second[-1]["role"] == "user" and second[-1]["images"] == [base64.b64encode(png).decode()]
    display = await agent_env.messages()
    assert not any(m.images for m in display)  # the display history is not polluted
    ctx = await agent_env.messages("context")
    assert any(m.images for m in ctx)


async def test_turn_is_saved_as_it_happens(agent_env) -> None:
    seen: list[list[str]] = []
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    agent_env.fake.script(text="done", delay_between_chunks=0.05)
    from agent.loop import get_agent

    async for ev in get_agent().run_stream(agent_env.session_id, "go"):
        if ev.type in ("tool_started", "tool_call", "stream_end"):
            seen.append([m.role for m in await agent_env.messages()])
    assert seen[0] == ["user", "assistant"]  # user message and the call, before the tool ran
    assert seen[1] == ["user", "assistant"]  # the result is saved right after the tool_call event
    assert seen[2] == ["user", "assistant", "tool", "assistant"]


async def test_files_are_listed_in_the_user_message(agent_env) -> None:
    agent_env.fake.script(text="ok")
    await agent_env.run("summarise this", files=[{"name": "report.pdf", "path": "/srv/x/report.pdf"}])
    user = agent_env.requests()[0]["messages"][-1]
    assert "report.pdf (/srv/x/report.pdf)" in user["content"]


async def test_context_vars_are_restored(agent_env) -> None:
    from agent import ctx

    ctx.current_session_id.set("outer")
    agent_env.fake.script(text="ok")
    await agent_env.run("x")
    assert ctx.current_session_id.get() == "outer"
    assert ctx.current_stop_event.get() is None


async def test_run_returns_text_and_run_ephemeral_reports_completion(agent_env) -> None:
    from agent import ctx
    from agent.loop import get_agent

    agent_env.fake.script(text="Non-streaming answer.")
    assert await get_agent().run(agent_env.session_id, "q") == "Non-streaming answer."
    ctx.current_user_id.set(agent_env.user.pk)
    agent_env.fake.script(text="Sub answer.")
    text, ok = await get_agent().run_ephemeral("task", "tester")
    assert (text, ok) == ("Sub answer.", True)
    agent_env.fake.script(hang_before_first_chunk=5, text="late")
    text, ok = await get_agent().run_ephemeral("task", "tester", timeout=0.3)
    assert ok is False and "did not finish" in text
    assert ctx.current_user_id.get() == agent_env.user.pk


async def test_context_cache_sees_rows_written_elsewhere(agent_env) -> None:
    from sessions_app.services import message_append

    agent_env.fake.script(text="first")
    await agent_env.run("one")
    # Another process (or the admin) appends a message: the next turn must see it.
    await sync_to_async(message_append)(session_id=agent_env.session_id, role="user", content="written elsewhere")
    agent_env.fake.script(text="second")
    await agent_env.run("two")
    contents = [m.get("content") for m in agent_env.requests()[-1]["messages"]]
    assert contents[-3:] == ["first", "written elsewhere", "two"]
