"""A prompt a CPU can afford (issue 24): a profile's prompt budget, compact definitions, tools on
demand through find_tools, and a prompt prefix that stays the same across a session's requests."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from agent.context import DEFAULT_PERSONA
from agent.toolplan import estimate_tokens

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
MANY = ["filesystem", "todo", "scratchpad", "reflect", "image_view", "list_tools", "tool_manual", "web_search",
        "web_view", "http_request", "spawn_agent"]


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def prompt_tokens(request: dict) -> int:
    """Estimated tokens of what every request of a new conversation carries: system prompt and tools."""
    return estimate_tokens(request["messages"][0]["content"]) + estimate_tokens(json.dumps(request.get("tools") or []))


def finder(request: dict) -> str:
    return next(t["function"]["description"] for t in request["tools"] if t["function"]["name"] == "find_tools")


async def test_tools_past_the_budget_wait_in_find_tools_and_stay_loaded_once_found(agent_env) -> None:
    await agent_env.set_profile(enabled_tools=MANY, prompt_budget_tokens=900)
    agent_env.fake.script(tool_calls=[{"name": "find_tools", "arguments": {"names": ["web_view"]}}])
    agent_env.fake.script(text="I can open pages now.")
    events = await agent_env.run("can you read web pages?")
    first, second = agent_env.requests()
    assert prompt_tokens(first) <= 900
    sent = tool_names(first)
    assert sent[-1] == "find_tools" and "web_view" not in sent
    # Every tool stays reachable: sent, or named with a line in find_tools.
    assert all(name in sent or f"{name}: " in finder(first) for name in MANY)
    loaded = next(e for e in events if e["type"] == "tool_call")
    assert loaded["success"] and '"name": "web_view"' in loaded["result"]
    # The loaded tool is offered from then on, after the others: the prefix before it is unchanged.
    assert tool_names(second) == [*sent, "web_view"]
    assert second["tools"][: len(sent) - 1] == first["tools"][: len(sent) - 1]
    agent_env.fake.script(text="Sure.")
    await agent_env.run("thanks")
    assert agent_env.requests()[-1]["tools"] == second["tools"]  # the same for every later turn
    assert agent_env.requests()[-1]["messages"][0] == second["messages"][0]


async def test_a_model_may_call_a_tool_it_found_in_the_list_without_loading_it(agent_env) -> None:
    await agent_env.set_profile(enabled_tools=MANY, prompt_budget_tokens=900)
    agent_env.fake.script(tool_calls=[{"name": "list_tools", "arguments": {}}])
    agent_env.fake.script(text="Here they are.")
    events = await agent_env.run("which tools do you have?")
    assert "list_tools" not in tool_names(agent_env.requests()[0])
    assert next(e for e in events if e["type"] == "tool_call")["success"] is True


async def test_definitions_that_fit_compacted_are_sent_compact(agent_env) -> None:
    await agent_env.set_profile(enabled_tools=["filesystem", "todo"], prompt_budget_tokens=900)
    agent_env.fake.script(text="ok")
    await agent_env.run("hi")
    request = agent_env.requests()[0]
    assert tool_names(request) == ["filesystem", "todo"] and prompt_tokens(request) <= 900
    filesystem = request["tools"][0]["function"]
    assert filesystem["description"] == "Read, write and organise files."
    assert all(len(p.get("description", "")) <= 80 for p in filesystem["parameters"]["properties"].values())
    assert filesystem["parameters"]["properties"]["action"]["enum"]  # the structure is whole


async def test_no_budget_sends_the_definitions_as_they_are(agent_env) -> None:
    await agent_env.set_profile(enabled_tools=MANY, prompt_budget_tokens=0)
    agent_env.fake.script(text="ok")
    await agent_env.run("hi")
    request = agent_env.requests()[0]
    assert tool_names(request) == [n for n in MANY]
    assert "find_tools" not in tool_names(request)
    assert len(request["tools"][0]["function"]["description"]) > 100


async def test_constrained_calls_reach_every_tool_within_the_budget(agent_env) -> None:
    await agent_env.set_profile(enabled_tools=MANY, prompt_budget_tokens=900, tool_calling="constrained")
    agent_env.fake.script(text='{"name": "web_view", "arguments": {}}')  # a waiting tool, arguments missing
    agent_env.fake.script(text=json.dumps({"tool": "web_view", "arguments": {"url": "https://example.org"}}))
    agent_env.fake.script(text="done")
    await agent_env.run("open example.org")
    first, constrained = agent_env.fake.chat_requests[:2]
    assert prompt_tokens(first.json) <= 900 and "web_view" not in tool_names(first.json)
    schema = agent_env.fake.schema_of(constrained)
    assert [b["properties"]["tool"]["const"] for b in schema["anyOf"]] == ["web_view"]  # the tool it named
    # An attempt that points at no tool is offered every tool, those waiting for find_tools too.
    agent_env.fake.script(text='{"name": "open_page", "arguments": {}}')
    agent_env.fake.script(text=json.dumps({"tool": "web_view", "arguments": {"url": "https://example.org"}}))
    agent_env.fake.script(text="done")
    await agent_env.run("open example.org again")
    schema = agent_env.fake.schema_of(agent_env.fake.chat_requests[-2])
    assert sorted(b["properties"]["tool"]["const"] for b in schema["anyOf"]) == sorted(MANY)


async def test_the_default_profile_fits_2000_tokens_with_every_tool_reachable(agent_env) -> None:
    from sessions_app.services import session_create

    settings.TOOLS_DIR = ROOT / "tools"  # the bundled user tools (get_current_datetime, user_notes)
    from tools_app.registry import reset_registry

    reset_registry()
    session = await sync_to_async(session_create)(owner=agent_env.user, profile_id="secretary")
    from agent.loop import get_agent
    from profiles_app.models import AgentProfile

    await sync_to_async(AgentProfile.objects.filter(pk="secretary").update)(planning_enabled=False)
    enabled = (await sync_to_async(AgentProfile.objects.get)(pk="secretary")).enabled_tools
    agent_env.fake.script(text="Hello.")
    async for _ in get_agent().run_stream(str(session.id), "hello"):
        pass
    request = agent_env.requests()[-1]
    assert DEFAULT_PERSONA.split("\n")[0] in request["messages"][0]["content"]
    assert prompt_tokens(request) <= 2000, prompt_tokens(request)
    sent = tool_names(request)
    assert len(enabled) >= 19
    assert all(name in sent or f"{name}: " in finder(request) for name in enabled)


async def test_the_small_profile_sees_every_tool_lean_within_its_budget(agent_env) -> None:
    """Compact definitions of local_small's seven tools were 70 tokens past its budget, so todo and
    spawn_agent waited behind find_tools, where the small models never looked (no helper was ever
    spawned). Lean definitions fit: every tool is in the request, the parameters some call needs keep
    their descriptions, options keep their name and type."""
    from local_models.profile import TOOLS, profile_upsert
    from sessions_app.services import session_create

    settings.TOOLS_DIR = ROOT / "tools"
    from tools_app.registry import reset_registry

    reset_registry()
    await sync_to_async(profile_upsert)(alias="small")
    from profiles_app.models import AgentProfile

    await sync_to_async(AgentProfile.objects.filter(pk="local_small").update)(llm_backend="ollama")  # the fake
    session = await sync_to_async(session_create)(owner=agent_env.user, profile_id="local_small")
    from agent.loop import get_agent

    agent_env.fake.script(text="Hello.")
    async for _ in get_agent().run_stream(str(session.id), "hello"):
        pass
    request = agent_env.requests()[-1]
    assert sorted(tool_names(request)) == sorted(TOOLS)  # no find_tools: nothing waits
    assert prompt_tokens(request) <= 2000, prompt_tokens(request)
    recall = next(t["function"]["parameters"]["properties"] for t in request["tools"]
                  if t["function"]["name"] == "schedule_recall")
    assert recall["when"]["description"] and recall["interval_seconds"]["description"]  # some call needs them
    assert recall["max_seconds"] == {"type": "integer", "minimum": 10}  # an option: name, type and bounds
    assert "description" not in recall["on_approval"] and recall["on_approval"]["enum"] == ["deny", "park"]


def test_the_admin_edits_a_profiles_tool_calling_and_prompt_budget(client) -> None:
    from django.contrib.auth import get_user_model

    from profiles_app.models import AgentProfile

    AgentProfile.objects.update_or_create(id="budgeted", defaults={"name": "Budgeted"})
    admin = get_user_model().objects.create_superuser("boss", "boss@example.org", "pw-long-enough-1")
    client.force_login(admin)
    page = client.get("/admin/agent/agentprofile/budgeted/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="tool_calling"' in html and 'name="prompt_budget_tokens"' in html
    assert 'value="2000"' in html and "Constrained" in html


def test_a_description_is_cut_at_its_first_sentence_not_at_an_abbreviation() -> None:
    from agent.decide import first_sentence

    assert first_sentence("Give 'query' as a few words, e.g. 'backup nas'. Every word must occur.") == (
        "Give 'query' as a few words, e.g. 'backup nas'.")
    assert first_sentence("Read it, i.e. the text; logs, etc. too. Then more.") == "Read it, i.e. the text; logs, etc. too."
    assert first_sentence("Runs at 5 p.m. daily. Next.") == "Runs at 5 p.m. daily."
    assert first_sentence("What time is it? Later.") == "What time is it?"
    assert first_sentence("x" * 300, 10) == "x" * 9 + "…"
