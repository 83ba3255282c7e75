"""The learning loop through the fake model: skill_write after a multi-step turn → a proposal shown
when the turn ends well → accept (as is or edited) / discard → versions → rollback."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import SkillProposal
from skills_app.services import proposals_after_turn
from skills_app.store import SkillStore
from tests.skills.conftest import skill_md
from tests.support.users import ApiClient, make_user, token_for

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = ["todo", "scratchpad", "skill_view", "skill_write"]
STEPS = [
    {"name": "scratchpad", "arguments": {"action": "write", "section": "notes", "content": "disk 71 %"}},
    {"name": "scratchpad", "arguments": {"action": "append", "section": "notes", "content": "load 0.3"}},
    {"name": "scratchpad", "arguments": {"action": "read", "section": "notes"}},
]
SKILL = skill_md("disk-report", "Report disk and load of the home server. Use when asked how the server is.",
                 "1. Write the numbers to the scratchpad.\n2. Read them back.\n3. Summarise.")


def _script_task(fake: Any, content: str = SKILL, *, final: str = "Disk 71 %, load 0.3.") -> None:
    for step in STEPS:
        fake.script(tool_calls=[step])
    fake.script(tool_calls=[{"name": "skill_write", "arguments": {"content": content, "note": "You ask this weekly."}}])
    fake.script(text=final)


async def _after_turn(env: Any) -> list[SkillProposal]:
    await sync_to_async(proposals_after_turn)(env.session_id)
    return await sync_to_async(lambda: list(SkillProposal.objects.filter(session_id=env.session_id)))()


async def _api(env: Any) -> ApiClient:
    return ApiClient(await sync_to_async(token_for)(env.user))


async def test_propose_accept_update_with_an_edit_and_roll_back(agent_env, skills_root: Path) -> None:
    await agent_env.set_profile(enabled_tools=TOOLS, enabled_skills=[])
    _script_task(agent_env.fake)
    events = await agent_env.run("how is my server?")
    write = [e for e in events if e["type"] == "tool_call" and e["tool"] == "skill_write"][0]
    assert write["success"] and write["result"].startswith("Proposed the new skill 'disk-report' (proposal ")
    # The learning line is in the prompt (skill_write offered); nothing is saved before the user decides.
    assert "propose a new skill" in agent_env.requests()[0]["messages"][0]["content"]
    assert not (skills_root / "disk-report").exists()
    [proposal] = await _after_turn(agent_env)
    assert proposal.status == "pending" and proposal.name == "disk-report" and proposal.updates == ""
    api = await _api(agent_env)

    shown = await sync_to_async(api.get)(f"/skill-proposals?session_id={agent_env.session_id}")
    assert [p["name"] for p in shown.json()] == ["disk-report"] and shown.json()[0]["note"] == "You ask this weekly."
    accepted = await sync_to_async(api.post)(f"/skill-proposals/{proposal.pk}/accept")
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["status"] == "accepted" and accepted.json()["version"] == 1
    store = SkillStore()
    assert store.get("disk-report").description.startswith("Report disk and load")
    profile = await _profile()
    assert profile.enabled_skills == ["disk-report"]  # enabled for the session's profile
    again = await sync_to_async(api.post)(f"/skill-proposals/{proposal.pk}/accept")
    assert again.status_code == 409 and again.json()["detail"] == "This proposal was already accepted."

    # A later turn uses the skill and proposes an improved version; the user edits it before accepting.
    agent_env.fake.script(tool_calls=[{"name": "skill_view", "arguments": {"name": "disk-report"}}])
    better = SKILL.replace("3. Summarise.", "3. Summarise.\n4. Warn above 80 %.")
    _script_task(agent_env.fake, better)
    await agent_env.run("and now?")
    assert "- disk-report: Report disk and load" in agent_env.requests()[-1]["messages"][0]["content"]
    second = (await _after_turn(agent_env))[-1]
    assert second.status == "pending" and second.updates == "1"
    edited = better.replace("Warn above 80 %.", "Warn above 85 %.")
    response = await sync_to_async(api.post)(f"/skill-proposals/{second.pk}/accept", {"content": edited})
    assert response.json()["version"] == 2 and response.json()["content"] == edited
    assert "85 %" in store.read_file("disk-report", "SKILL.md")
    assert [v.source for v in store.versions("disk-report")] == ["proposal", "proposal"]

    # One click back to version 1 (kept as version 3; nothing is lost).
    rolled = await sync_to_async(api.post)("/skills/disk-report/rollback", {"version": 1})
    assert rolled.json() == {"name": "disk-report", "version": 3}
    text = store.read_file("disk-report", "SKILL.md")
    assert "Warn above" not in text and text == SKILL


async def test_an_edit_with_bad_markdown_is_refused_and_the_proposal_stays(agent_env, skills_root: Path) -> None:
    await agent_env.set_profile(enabled_tools=TOOLS)
    _script_task(agent_env.fake)
    await agent_env.run("how is my server?")
    [proposal] = await _after_turn(agent_env)
    api = await _api(agent_env)
    for content, message in [
        ("no front matter at all", "The skill was not saved: SKILL.md must start with YAML front matter"),
        ("---\nname: Disk Report\ndescription: d\n---\nx", "The skill was not saved: the name 'Disk Report' is not valid"),
        ("---\nname: disk-report\n---\nx", "The skill was not saved: the front matter has no 'description' field"),
    ]:
        response = await sync_to_async(api.post)(f"/skill-proposals/{proposal.pk}/accept", {"content": content})
        assert response.status_code == 400 and response.json()["detail"].startswith(message), response.json()
    await sync_to_async(proposal.refresh_from_db)()
    assert proposal.status == "pending" and not (skills_root / "disk-report").exists()
    discarded = await sync_to_async(api.post)(f"/skill-proposals/{proposal.pk}/discard")
    assert discarded.json()["status"] == "discarded" and not (skills_root / "disk-report").exists()


async def test_an_edit_that_renames_onto_another_skill_is_refused(agent_env, skills_root: Path, settings: Any) -> None:
    """The card said "a new skill": saving it over another skill (a bundled one, say) needs its own proposal."""
    from tests.skills.conftest import make_skill

    make_skill(Path(settings.SKILLS_BUNDLED_DIR), "morning-news", description="Bundled news briefing.")
    await agent_env.set_profile(enabled_tools=TOOLS)
    _script_task(agent_env.fake)
    await agent_env.run("how is my server?")
    [proposal] = await _after_turn(agent_env)
    api = await _api(agent_env)
    renamed = SKILL.replace("name: disk-report", "name: morning-news")
    response = await sync_to_async(api.post)(f"/skill-proposals/{proposal.pk}/accept", {"content": renamed})
    assert response.status_code == 409 and response.json()["detail"] == (
        "The skill was not saved: a skill named 'morning-news' already exists. Keep the proposed name "
        "'disk-report' or choose a new one.")
    await sync_to_async(proposal.refresh_from_db)()
    assert proposal.status == "pending"
    skill = SkillStore().get("morning-news")
    assert skill.source == "bundled" and skill.description == "Bundled news briefing."
    fresh = SKILL.replace("name: disk-report", "name: disk-and-load")
    response = await sync_to_async(api.post)(f"/skill-proposals/{proposal.pk}/accept", {"content": fresh})
    assert response.json()["name"] == "disk-and-load" and response.json()["version"] == 1


async def test_skill_write_is_refused_too_early_twice_or_with_bad_content(agent_env, skills_root: Path) -> None:
    await agent_env.set_profile(enabled_tools=TOOLS, max_iterations=10)
    fake = agent_env.fake
    fake.script(tool_calls=[STEPS[0]])
    fake.script(tool_calls=[{"name": "skill_write", "arguments": {"content": SKILL}}])
    fake.script(text="done")
    events = await agent_env.run("quick one")
    result = [e["result"] for e in events if e.get("tool") == "skill_write" and e["type"] == "tool_call"][0]
    assert result == ("Error: not now: propose a skill only after a task that took at least 3 successful tool calls "
                      "in this turn (this one has 1). Finish the user's request first.")
    for step in STEPS:
        fake.script(tool_calls=[step])
    fake.script(tool_calls=[{"name": "skill_write", "arguments": {"content": "---\nname: x\n---\nno description"}}])
    fake.script(tool_calls=[{"name": "skill_write", "arguments": {"content": SKILL}}])
    fake.script(tool_calls=[{"name": "skill_write", "arguments": {"content": SKILL.replace("disk-report", "disk-two")}}])
    fake.script(text="done")
    events = await agent_env.run("long one")
    results = [e["result"] for e in events if e.get("tool") == "skill_write" and e["type"] == "tool_call"]
    assert results[0] == "Error: the SKILL.md is not valid: the front matter has no 'description' field; add 'description: ...' (it is required)"
    assert results[1].startswith("Proposed the new skill 'disk-report'")
    assert results[2] == "Error: you already proposed the skill 'disk-report' in this turn; one proposal per turn"
    assert [p.status for p in await _after_turn(agent_env)] == ["pending"]


async def test_a_turn_that_does_not_end_well_drops_its_proposal(agent_env, skills_root: Path) -> None:
    await agent_env.set_profile(enabled_tools=TOOLS, max_iterations=4)
    _script_task(agent_env.fake)  # 3 steps + skill_write = 4 iterations: the limit, no final answer
    events = await agent_env.run("how is my server?")
    assert "max_iterations" in events[-1]["content"]
    assert [p.status for p in await _after_turn(agent_env)] == ["dropped"]
    listed = await sync_to_async((await _api(agent_env)).get)(f"/skill-proposals?session_id={agent_env.session_id}")
    assert listed.json() == []


async def test_only_the_owner_decides_and_only_if_they_may_write_skills(agent_env, skills_root: Path) -> None:
    await agent_env.set_profile(enabled_tools=TOOLS)
    _script_task(agent_env.fake)
    await agent_env.run("how is my server?")
    [proposal] = await _after_turn(agent_env)
    stranger = ApiClient(await sync_to_async(lambda: token_for(make_user("mallory")))())
    for path in (f"/skill-proposals/{proposal.pk}", f"/skill-proposals/{proposal.pk}/accept"):
        response = await sync_to_async(stranger.post if path.endswith("accept") else stranger.get)(path)
        assert response.status_code == 404 and response.json()["detail"] == f"Skill proposal {proposal.pk} not found."
    await sync_to_async(type(agent_env.user).objects.filter(pk=agent_env.user.pk).update)(is_staff=False)
    denied = await sync_to_async((await _api(agent_env)).post)(f"/skill-proposals/{proposal.pk}/accept")
    assert denied.status_code == 403 and "Only staff users may add skills" in denied.json()["detail"]


async def test_skill_write_is_staff_only(agent_env, skills_root: Path) -> None:
    from django.contrib.auth import get_user_model

    from sessions_app.services import session_create

    await agent_env.set_profile(enabled_tools=TOOLS)
    user = await sync_to_async(make_user)("bob")
    session = await sync_to_async(session_create)(owner=user, profile_id="tester")
    fake = agent_env.fake
    fake.script(tool_calls=[{"name": "skill_write", "arguments": {"content": SKILL}}])
    fake.script(text="ok")
    from agent.loop import get_agent

    events = [e.to_dict() async for e in get_agent().run_stream(str(session.id), "save how to check the disk")]
    result = [e["result"] for e in events if e["type"] == "tool_call"][0]
    # Not offered to a user who may not run it, and if called anyway, refused with the reason (issue 21).
    assert result.startswith("Error: permission denied: 'skill_write'") and "only staff users may run it" in result
    assert {t["function"]["name"] for t in agent_env.requests()[0]["tools"]} == {"todo", "scratchpad", "skill_view"}
    system = agent_env.requests()[0]["messages"][0]["content"]
    assert "skill_write" not in system  # nor named in the prompt
    await sync_to_async(get_user_model().objects.filter(username="bob").update)(is_staff=True)


async def test_the_run_registry_shows_the_proposal_to_open_clients(agent_env, skills_root: Path, settings: Any) -> None:
    """Through the real run registry: the turn-finished hook turns the draft into a card, published live."""
    from sessions_app.runs import TurnRequest, get_run_registry
    from tests.transport.helpers import connect, receive_until

    settings.WS_DELTA_COALESCE_MS = 0
    await agent_env.set_profile(enabled_tools=TOOLS)
    _script_task(agent_env.fake)
    comm = await connect(agent_env.session_id, await sync_to_async(token_for)(agent_env.user))
    await receive_until(comm, "session_sync")
    result = await get_run_registry().run_turn(TurnRequest(session_id=agent_env.session_id, text="how is my server?",
                                                           user_id=agent_env.user.pk, user_role="staff"))
    assert result.outcome == "success"
    event = (await receive_until(comm, "skill_proposal"))[-1]
    assert event["action"] == "proposed" and event["session_id"] == agent_env.session_id
    assert event["proposal"]["name"] == "disk-report" and event["proposal"]["status"] == "pending"
    assert event["proposal"]["content"] == SKILL
    from agent.events import event_from_dict

    wire = {k: v for k, v in event.items() if k != "seq"}
    assert event_from_dict(json.loads(json.dumps(wire))).to_dict() == wire
    await sync_to_async((await _api(agent_env)).post)(f"/skill-proposals/{event['proposal']['id']}/discard")
    decided = (await receive_until(comm, "skill_proposal"))[-1]
    assert decided["action"] == "discarded" and decided["proposal"]["status"] == "discarded"
    await comm.disconnect()


async def _profile() -> Any:
    from profiles_app.models import AgentProfile

    return await sync_to_async(AgentProfile.objects.get)(pk="tester")


async def test_calls_that_did_not_run_do_not_count_towards_a_proposal(agent_env, skills_root: Path) -> None:
    """Calls the approval rules refused ('Not run: …') did no work: a skill is not distilled from them."""
    from approvals_app.models import ToolRule
    from approvals_app.selectors import invalidate_rules

    await agent_env.set_profile(enabled_tools=TOOLS, max_iterations=10)
    await sync_to_async(ToolRule.objects.create)(tool="todo", decision="deny")
    invalidate_rules()
    fake = agent_env.fake
    fake.script(tool_calls=[STEPS[0]])
    fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "add", "text": "check disk"}}])
    fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "add", "text": "check load"}}])
    fake.script(tool_calls=[{"name": "skill_write", "arguments": {"content": SKILL}}])
    fake.script(text="done")
    events = await agent_env.run("check the server")
    results = [e["result"] for e in events if e["type"] == "tool_call"]
    assert results[1].startswith("Not run: ") and results[2].startswith("Not run: ")
    assert results[3] == ("Error: not now: propose a skill only after a task that took at least 3 successful tool "
                          "calls in this turn (this one has 1). Finish the user's request first.")
    assert await _after_turn(agent_env) == []
    invalidate_rules()
