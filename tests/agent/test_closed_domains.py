"""Closed domains (issue 24): a parameter whose values are a closed set known at run time (the active
profiles, the turn's tools) is an enum in the definitions the model reads and in the grammar of a
constrained call, so a value outside the set cannot be generated; the marker never leaves Navi."""
from __future__ import annotations

import json

import pytest

from agent.domains import DOMAIN_KEY, close_domains

pytestmark = pytest.mark.django_db(transaction=True)


def as_text(name: str, **arguments: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def tool(request: dict, name: str) -> dict:
    return next(t["function"] for t in request.get("tools") or [] if t["function"]["name"] == name)


async def test_profile_ids_are_an_enum_for_the_model_and_for_the_grammar(agent_env) -> None:
    from profiles_app.models import AgentProfile

    await AgentProfile.objects.acreate(id="gardener", name="Gardener", system_prompt="Plants.")
    await agent_env.set_profile(tool_calling="constrained")
    agent_env.fake.script(text=as_text("spawn_agent", task="count the plants", profile_id="user"))  # no such profile
    agent_env.fake.script(text=json.dumps({"tool": "spawn_agent",
                                           "arguments": {"task": "count the plants", "profile_id": "gardener"}}))
    agent_env.fake.script(text="There are 3 plants.")  # the subagent
    agent_env.fake.script(text="The helper counted 3 plants.")
    events = await agent_env.run("have the gardener helper count the plants")
    ran = [(e["tool"], e["args"]) for e in events if e["type"] == "tool_call" and not e.get("is_subagent")]
    assert ran == [("spawn_agent", {"task": "count the plants", "profile_id": "gardener"})]  # "user" never ran
    first, constrained = agent_env.fake.chat_requests[:2]
    ids = sorted(await _active_ids())
    assert sorted(tool(first.json, "spawn_agent")["parameters"]["properties"]["profile_id"]["enum"]) == ids
    assert sorted(tool(first.json, "switch_profile")["parameters"]["properties"]["profile_id"]["enum"]) == ids
    grammar = agent_env.fake.schema_of(constrained)
    branch = next(b for b in grammar["anyOf"] if b["properties"]["tool"]["const"] == "spawn_agent")
    assert sorted(branch["properties"]["arguments"]["properties"]["profile_id"]["enum"]) == ids
    for request in agent_env.fake.chat_requests:
        assert DOMAIN_KEY not in json.dumps(request.json)
    assert events[-1]["content"] == "The helper counted 3 plants."


async def _active_ids() -> list[str]:
    from asgiref.sync import sync_to_async

    from agent import ports

    return await sync_to_async(ports.profiles().active_ids)()


def test_a_domain_without_values_leaves_the_parameter_open_and_drops_the_marker() -> None:
    schema = {"type": "function", "function": {"name": "t", "parameters": {"type": "object", "properties": {
        "who": {"type": "string", DOMAIN_KEY: "profiles"},
        "tools": {"type": "array", "items": {"type": "string", DOMAIN_KEY: "tools"}}}}}}
    closed = close_domains([schema], {"tools": ["a", "b", "a"]})[0]["function"]["parameters"]["properties"]
    assert closed == {"who": {"type": "string"}, "tools": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}}
    assert DOMAIN_KEY in schema["function"]["parameters"]["properties"]["who"]  # the registry's own copy is untouched
    plain = {"type": "function", "function": {"name": "p", "parameters": {"type": "object"}}}
    assert close_domains([plain], {})[0] is plain
