"""The documented event sequences (spec 002 "Typical Event Sequences"), exactly."""
from __future__ import annotations

import json

import pytest

from agent.events import event_from_dict
from tests.support.agent_env import types

pytestmark = pytest.mark.django_db(transaction=True)


async def test_simple_question_with_thinking(agent_env) -> None:
    agent_env.fake.script(thinking="The user greets me.", text="Hello! How can I help?", token_size=4)
    events = await agent_env.run("Hi there, what's new?")
    assert types(events) == ["thinking_delta", "thinking_end", "stream_delta", "stream_end"]
    assert "".join(e["delta"] for e in events if e["type"] == "thinking_delta") == "The user greets me."
    assert "".join(e["delta"] for e in events if e["type"] == "stream_delta") == "Hello! How can I help?"
    end = events[-1]
    assert end == {"type": "stream_end", "content": "Hello! How can I help?", "context_tokens": 19,
                   "max_context_tokens": 65536}
    for e in events:  # every event round-trips through JSON
        assert event_from_dict(json.loads(json.dumps(e))).to_dict() == e
    rows = await agent_env.messages()
    assert [(m.role, m.content) for m in rows] == [("user", "Hi there, what's new?"),
                                                    ("assistant", "Hello! How can I help?")]
    assert rows[1].thinking == "The user greets me."


async def test_simple_question_without_thinking(agent_env) -> None:
    agent_env.fake.script(text="Four.")
    assert types(await agent_env.run("2+2?")) == ["stream_delta", "stream_end"]


async def test_with_planning_and_tools(agent_env) -> None:
    await agent_env.set_profile(planning_enabled=True)
    fake = agent_env.fake
    fake.script(text="Goal: organise the move.\nComplexity: medium\nREFLECT: no")
    fake.script(text="Milestones: list, answer\n1. Write the checklist — TOOL: todo\n2. Read it back — TOOL: todo\n3. Answer — SELF")
    fake.script(thinking="I will write the list.", tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    fake.script(tool_calls=[{"name": "scratchpad", "arguments": {"action": "write", "section": "notes", "content": "x"}}])
    fake.script(thinking="Now answer.", text="Your checklist is ready.")
    events = await agent_env.run("Plan my move to Berlin with a checklist")
    assert types(events) == [
        "plan_ready", "turn_thinking", "tool_started", "tool_call", "tool_started", "tool_call",
        "thinking_delta", "thinking_end", "stream_delta", "stream_end",
    ]
    plan = events[0]["plan"]
    assert "1. Write the checklist" in plan
    # Planning calls: think=false, temperature 0.3, no tools.
    for req in agent_env.requests()[:2]:
        assert req["think"] is False if "think" in req else True
        assert req["options"]["temperature"] == 0.3 and not req.get("tools")
    rows = await agent_env.messages()
    assert rows[1].is_plan and rows[1].role == "assistant"
    # The todo list was populated from the plan.
    read = next(e for e in events if e["type"] == "tool_call")
    assert "Write the checklist" in read["result"] and "Read it back" in read["result"]
    # The plan is in the context sent to the model as an assistant message.
    third = agent_env.requests()[2]["messages"]
    assert any(m["role"] == "assistant" and "Milestones" in (m.get("content") or "") for m in third)


async def test_subagent_events_are_forwarded(agent_env) -> None:
    fake = agent_env.fake
    fake.script(tool_calls=[{"name": "spawn_agent", "arguments": {"task": "Make a todo list with one step"}}])
    fake.script(thinking="Sub: I'll set the list.",
                tool_calls=[{"name": "todo", "arguments": {"action": "set", "steps": ["buy milk"]}}])
    fake.script(tool_calls=[{"name": "filesystem", "arguments": {"action": "list", "path": "."}}])
    fake.script(text="Sub done: list has one step.")
    fake.script(text="The subagent made your list.")
    events = await agent_env.run("delegate it")
    assert [(e["type"], e.get("tool"), e.get("is_subagent")) for e in events if e["type"] != "stream_delta"] == [
        ("tool_started", "spawn_agent", False),
        ("turn_thinking", None, True),
        ("tool_started", "todo", True),
        ("tool_call", "todo", True),
        ("tool_started", "filesystem", True),
        ("tool_call", "filesystem", True),
        ("tool_call", "spawn_agent", False),
        ("stream_end", None, None),
    ]
    spawn = [e for e in events if e.get("tool") == "spawn_agent"][-1]
    assert spawn["success"] is True and "Sub done" in spawn["result"]
    # The subagent's tools come from subagent_tools; it has no spawn_agent itself.
    sub_tools = {t["function"]["name"] for t in agent_env.requests()[1]["tools"]}
    assert sub_tools == {"todo", "filesystem"}


async def test_profile_switch(agent_env) -> None:
    fake = agent_env.fake
    fake.script(tool_calls=[{"name": "switch_profile", "arguments": {"profile_id": "server_admin"}}])
    fake.script(text="Now I am your server admin.")
    events = await agent_env.run("check my server")
    assert types(events) == ["tool_started", "profile_switched", "tool_call", "stream_delta", "stream_end"]
    assert events[1] == {"type": "profile_switched", "profile_id": "server_admin", "profile_name": "Server Administrator"}
    second_system = agent_env.requests()[1]["messages"][0]["content"]
    assert "server administrator" in second_system
    from asgiref.sync import sync_to_async

    from sessions_app.models import Session

    assert (await sync_to_async(Session.objects.get)(pk=agent_env.session_id)).profile_id == "server_admin"
