"""Each thinking-mechanics flag, shown by its effect on what the model receives."""
from __future__ import annotations

import pytest

from agent.profiles import ProfileSpec

pytestmark = pytest.mark.django_db(transaction=True)


def system_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "system"]


def todo(action: str, **kw) -> dict:
    return {"name": "todo", "arguments": {"action": action, **kw}}


def test_documented_defaults() -> None:
    p = ProfileSpec(id="x", name="x")
    assert (p.think_enabled, p.iteration_budget_enabled, p.planning_phase2_enabled, p.goal_anchoring_enabled,
            p.goal_anchoring_interval, p.anti_stall_enabled, p.anti_stall_threshold, p.step_validation_enabled,
            p.adaptive_replan_enabled, p.subagent_planning_enabled) == (
        True, True, False, True, 5, True, 8, False, False, False)
    from profiles_app.models import AgentProfile

    m = AgentProfile()
    assert (m.think_enabled, m.iteration_budget_enabled, m.goal_anchoring_interval, m.anti_stall_threshold,
            m.step_validation_enabled, m.adaptive_replan_enabled, m.max_iterations) == (True, True, 5, 8, False, False, 50)


async def test_think_flag(agent_env, settings) -> None:
    await agent_env.set_profile(think_enabled=True)
    agent_env.fake.script(text="a")
    await agent_env.run("x")
    assert agent_env.requests()[-1]["think"] is True
    await agent_env.set_profile(think_enabled=False)
    agent_env.fake.script(text="b")
    await agent_env.run("y")
    assert agent_env.requests()[-1].get("think") in (False, None)


async def test_iteration_budget(agent_env) -> None:
    await agent_env.set_profile(iteration_budget_enabled=True, max_iterations=6)
    agent_env.fake.script(tool_calls=[todo("read")])
    agent_env.fake.script(text="done")
    await agent_env.run("x")
    first, second = agent_env.requests()
    assert any("Iteration budget: step 1 of 6" in t for t in system_texts(first))
    assert any("step 2 of 6" in t for t in system_texts(second))
    await agent_env.set_profile(iteration_budget_enabled=False)
    agent_env.fake.script(text="done")
    await agent_env.run("y")
    assert not any("Iteration budget" in t for t in system_texts(agent_env.requests()[-1]))


async def test_goal_anchoring_every_n_iterations(agent_env) -> None:
    await agent_env.set_profile(goal_anchoring_enabled=True, goal_anchoring_interval=2, max_iterations=6)
    for section in ("a", "b", "c"):  # different calls: the repeated-call guard stays out of the way
        agent_env.fake.script(tool_calls=[{"name": "scratchpad", "arguments": {"action": "read", "section": section}}])
    agent_env.fake.script(text="done")
    await agent_env.run("Find the cheapest flight to Lisbon")
    anchored = ["Goal reminder" in " ".join(system_texts(r)) for r in agent_env.requests()]
    assert anchored == [False, False, True, False]
    anchor = next(t for t in system_texts(agent_env.requests()[2]) if t.startswith("Goal reminder"))
    assert "Find the cheapest flight to Lisbon" in anchor


async def test_anti_stall_warning(agent_env) -> None:
    await agent_env.set_profile(anti_stall_enabled=True, anti_stall_threshold=2, max_iterations=6)
    agent_env.fake.script(tool_calls=[todo("set", steps=["a", "b"])])
    agent_env.fake.script(tool_calls=[todo("read")])
    agent_env.fake.script(tool_calls=[{"name": "scratchpad", "arguments": {"action": "read"}}])
    agent_env.fake.script(text="done")
    await agent_env.run("x")
    warned = ["Anti-stall warning" in " ".join(system_texts(r)) for r in agent_env.requests()]
    assert warned == [False, False, False, True]


async def test_step_validation(agent_env) -> None:
    await agent_env.set_profile(step_validation_enabled=True)
    agent_env.fake.script(tool_calls=[todo("set", steps=["backup db"])])
    agent_env.fake.script(tool_calls=[todo("update", step=1, status="done")])
    agent_env.fake.script(tool_calls=[todo("update", step=1, status="done", validation="dump is 40 MB, sha ok")])
    agent_env.fake.script(text="done")
    events = await agent_env.run("x")
    results = [e for e in events if e["type"] == "tool_call"]
    assert results[1]["success"] is False and "validation" in results[1]["result"]
    assert results[2]["success"] is True


async def test_adaptive_replan_after_a_failed_step(agent_env) -> None:
    await agent_env.set_profile(adaptive_replan_enabled=True)
    agent_env.fake.script(tool_calls=[todo("set", steps=["ping host", "report"])])
    agent_env.fake.script(tool_calls=[todo("update", step=1, status="failed", note="host down")])
    agent_env.fake.script(text="It failed.")
    await agent_env.run("x")
    texts = [" ".join(system_texts(r)) for r in agent_env.requests()]
    assert "A plan step failed: ping host" in texts[2] and "A plan step failed" not in texts[1]
    await agent_env.set_profile(adaptive_replan_enabled=False)
    agent_env.fake.script(tool_calls=[todo("set", steps=["ping host"])])
    agent_env.fake.script(tool_calls=[todo("update", step=1, status="failed")])
    agent_env.fake.script(text="It failed.")
    await agent_env.run("y")
    assert "A plan step failed" not in " ".join(system_texts(agent_env.requests()[-1]))


async def test_subagent_planning(agent_env) -> None:
    await agent_env.set_profile(subagent_planning_enabled=True)
    fake = agent_env.fake
    fake.script(tool_calls=[{"name": "spawn_agent", "arguments": {"task": "research the topic carefully"}}])
    fake.script(text="Goal: research.\nREFLECT: no")  # subagent phase 1
    fake.script(text="1. Search — SELF\n2. Answer — SELF")  # subagent phase 3
    fake.script(text="Sub result.")
    fake.script(text="Parent answer.")
    events = await agent_env.run("x")
    assert events[-1]["content"] == "Parent answer."
    sub_final = agent_env.requests()[3]["messages"]
    assert any(m["role"] == "assistant" and "1. Search" in (m.get("content") or "") for m in sub_final)
    assert not any(e["type"] == "plan_ready" for e in events)  # only the parent's plan is a card


async def test_phase2_review_runs_only_when_enabled_and_asked(agent_env) -> None:
    await agent_env.set_profile(planning_enabled=True, planning_phase2_enabled=True)
    fake = agent_env.fake
    fake.script(text="Goal: x\nREFLECT: yes")
    fake.script(text="## Critic\nrisky\n## Pragmatist\nsimpler\n## Detailer\nmore\n## Plan Adjustments\nadd a check")
    fake.script(text="1. Check — SELF\n2. Answer — SELF")
    fake.script(text="Answer.")
    events = await agent_env.run("complex thing")
    assert events[0]["type"] == "plan_ready"
    assert "add a check" in agent_env.requests()[2]["messages"][0]["content"]


@pytest.mark.parametrize(
    "scripts",
    [
        ["DIRECT"],
        ["Goal: x\nREFLECT: no", "I cannot make a plan, sorry."],
        ["garbage without markers", "still garbage"],
        [""],
        ["Goal\nREFLECT: maybe", "DIRECT"],
    ],
)
async def test_malformed_planning_output_skips_planning(agent_env, scripts) -> None:
    await agent_env.set_profile(planning_enabled=True)
    for text in scripts:
        agent_env.fake.script(text=text)
    agent_env.fake.script(text="Plain answer.")
    events = await agent_env.run("something")
    assert [e["type"] for e in events if e["type"] != "stream_delta"] == ["stream_end"]
    assert events[-1]["content"] == "Plain answer."


async def test_planning_server_error_skips_planning(agent_env) -> None:
    await agent_env.set_profile(planning_enabled=True)
    agent_env.fake.script(http_status=500, error="boom")
    agent_env.fake.script(text="Plain answer.")
    events = await agent_env.run("something")
    assert events[-1]["content"] == "Plain answer."


async def test_plan_is_capped_at_fifteen_steps(agent_env) -> None:
    await agent_env.set_profile(planning_enabled=True)
    agent_env.fake.script(text="Goal\nREFLECT: no")
    agent_env.fake.script(text="\n".join(f"{i}. Step number {i} — SELF" for i in range(1, 21)))
    agent_env.fake.script(text="ok")
    events = await agent_env.run("big job")
    plan = events[0]["plan"]
    assert "15. Step number 15" in plan and "16. Step number 16" not in plan
