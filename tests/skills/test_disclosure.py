"""Progressive disclosure through the fake model: the system prompt names the enabled skills and
their descriptions only; a skill's instructions reach the model only after skill_view, and the
turn records the skill it used."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skills_app.catalog import build_block, estimate_tokens, get_catalog
from skills_app.store import SkillStore
from tests.skills.conftest import make_skill, skill_md

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = ["todo", "scratchpad", "skill_view"]


def _system(request: dict[str, Any]) -> str:
    return request["messages"][0]["content"]


@pytest.fixture
def two_skills(skills_root: Path) -> Path:
    make_skill(skills_root, "backup-check", description="Check that last night's backup ran. Use when asked about backups.",
               body="BODY-MARKER: run `ls -lt /backups` and compare dates.",
               files={"references/hosts.md": "REFERENCE-MARKER: nas, pi"})
    make_skill(skills_root, "plant-care", description="Water the plants on schedule.", body="PLANT-BODY")
    return skills_root


async def test_the_prompt_lists_descriptions_and_the_body_comes_with_skill_view(agent_env, two_skills: Path) -> None:
    await agent_env.set_profile(enabled_tools=TOOLS, enabled_skills=["backup-check"])
    fake = agent_env.fake
    fake.script(tool_calls=[{"name": "skill_view", "arguments": {"name": "backup-check"}}])
    fake.script(tool_calls=[{"name": "skill_view", "arguments": {"name": "backup-check", "file": "references/hosts.md"}}])
    fake.script(text="Your backup ran at 02:00.")
    events = await agent_env.run("did my backup run?")
    first, second, third = agent_env.requests()
    system = _system(first)
    assert "- backup-check: Check that last night's backup ran. Use when asked about backups." in system
    assert "plant-care" not in system  # not enabled for this profile
    assert "BODY-MARKER" not in str(first["messages"]) and "REFERENCE-MARKER" not in str(first["messages"])
    assert any("BODY-MARKER" in (m.get("content") or "") for m in second["messages"] if m["role"] == "tool")
    assert any("REFERENCE-MARKER" in (m.get("content") or "") for m in third["messages"] if m["role"] == "tool")
    # The skills block is part of a byte-identical prompt prefix, call after call.
    assert _system(first) == _system(second) == _system(third)
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c["success"] for c in calls] == [True, True]
    assert calls[0]["result"].startswith("# Skill: backup-check\nCheck that last night's backup ran.")
    assert "references/hosts.md" in calls[0]["result"]
    # The turn records the skill it used on the tool messages (the chat's chip reads it).
    rows = await agent_env.messages()
    used = [(m.name, m.metadata.get("skill")) for m in rows if m.role == "tool"]
    assert used == [("skill_view", "backup-check"), ("skill_view", "backup-check")]


async def test_an_unknown_skill_or_file_tells_the_model_what_exists(agent_env, two_skills: Path) -> None:
    await agent_env.set_profile(enabled_tools=TOOLS, enabled_skills=["backup-check", "plant-care"])
    fake = agent_env.fake
    fake.script(tool_calls=[{"name": "skill_view", "arguments": {"name": "backup-chek"}}])
    fake.script(tool_calls=[{"name": "skill_view", "arguments": {"name": "backup-check", "file": "../plant-care/SKILL.md"}}])
    fake.script(text="ok")
    events = await agent_env.run("backups?")
    results = [(e["success"], e["result"]) for e in events if e["type"] == "tool_call"]
    assert results[0] == (False, "Error: there is no skill named 'backup-chek'. Skills of this profile: "
                                 "backup-check, plant-care")
    assert results[1][0] is False and "contains '..'" in results[1][1]


async def test_a_skill_the_profile_does_not_list_is_not_read(agent_env, two_skills: Path) -> None:
    """Enabled per profile means usable per profile: skill_view refuses another profile's skill by name."""
    await agent_env.set_profile(enabled_tools=TOOLS, enabled_skills=["backup-check"])
    fake = agent_env.fake
    fake.script(tool_calls=[{"name": "skill_view", "arguments": {"name": "plant-care"}}])
    fake.script(tool_calls=[{"name": "skill_view", "arguments": {"name": "plant-care", "file": "SKILL.md"}}])
    fake.script(text="ok")
    events = await agent_env.run("plants?")
    results = [(e["success"], e["result"]) for e in events if e["type"] == "tool_call"]
    refused = (False, "Error: the skill 'plant-care' is not enabled for this profile. Skills of this profile: backup-check")
    assert results == [refused, refused]
    assert "PLANT-BODY" not in str(agent_env.requests())
    await agent_env.set_profile(enabled_tools=TOOLS, enabled_skills=[])
    fake.script(tool_calls=[{"name": "skill_view", "arguments": {"name": "backup-check"}}])
    fake.script(text="ok")
    events = await agent_env.run("backups?")
    result = [e["result"] for e in events if e["type"] == "tool_call"][0]
    assert result == "Error: the skill 'backup-check' is not enabled for this profile. Skills of this profile: none"


async def test_no_block_without_skill_view_or_enabled_skills(agent_env, two_skills: Path) -> None:
    await agent_env.set_profile(enabled_tools=["todo"], enabled_skills=["backup-check"])
    agent_env.fake.script(text="hi")
    await agent_env.run("hello")
    await agent_env.set_profile(enabled_tools=TOOLS, enabled_skills=[])
    agent_env.fake.script(text="hi")
    await agent_env.run("hello")
    await agent_env.set_profile(enabled_tools=TOOLS, enabled_skills=["*"])
    agent_env.fake.script(text="hi")
    await agent_env.run("hello")
    without_tool, without_skills, every = (_system(r) for r in agent_env.requests())
    assert "## Skills" not in without_tool and "## Skills" not in without_skills
    assert "- backup-check:" in every and "- plant-care:" in every


async def test_a_skill_saved_between_turns_is_in_the_next_prompt(agent_env, skills_root: Path) -> None:
    await agent_env.set_profile(enabled_tools=TOOLS, enabled_skills=["new-skill"])
    agent_env.fake.script(text="one")
    await agent_env.run("first")
    SkillStore().save("new-skill", {"SKILL.md": skill_md("new-skill", "Brand new know-how.").encode()}, source="install")
    agent_env.fake.script(text="two")
    await agent_env.run("second")
    before, after = (_system(r) for r in agent_env.requests())
    assert "new-skill" not in before and "- new-skill: Brand new know-how." in after


async def test_a_broken_skills_directory_never_breaks_a_turn(agent_env, skills_root: Path, settings: Any) -> None:
    make_skill(skills_root, "fine-skill", description="Fine.")
    broken = skills_root / "broken-skill"
    broken.mkdir()
    (broken / "SKILL.md").write_bytes(b"---\nname: [\n---\n")
    await agent_env.set_profile(enabled_tools=TOOLS, enabled_skills=["*"])
    agent_env.fake.script(text="fine")
    events = await agent_env.run("hi")
    assert events[-1]["type"] == "stream_end"
    system = _system(agent_env.requests()[0])
    assert "- fine-skill: Fine." in system and "broken-skill" not in system


def test_the_block_is_bounded_and_stable() -> None:
    many = [(f"skill-{i:02d}", f"Sentence one of skill {i}. " + "More detail. " * 70) for i in range(40)]
    for budget in (1500, 400, 150):
        block = build_block(many, learn=True, max_tokens=budget)
        assert estimate_tokens(block) <= budget, budget
        assert block == build_block(list(reversed(many)), learn=True, max_tokens=budget)  # order-independent
    assert "- skill-00: Sentence one of skill 0." in build_block(many, learn=False, max_tokens=1500)
    tight = build_block(many, learn=False, max_tokens=400)
    assert "more skills (read with skill_view): " in tight and "skill-39" in tight
    few = build_block(many[:3], learn=False, max_tokens=100_000)
    assert "More detail. More detail." in few  # full descriptions when they fit
    assert build_block([], learn=False, max_tokens=1500) == ""


def test_the_catalog_reads_the_disk_only_when_something_changed(skills_root: Path, settings: Any) -> None:
    from agent import ctx
    from agent.profiles import ProfileSpec

    ctx.current_user_role.set("staff")
    make_skill(skills_root, "one", description="First.")
    catalog = get_catalog()
    profile = ProfileSpec(id="p", name="P", enabled_skills=("*",))
    block = catalog.prompt_block(profile, ["skill_view"])
    scan = catalog.scan()
    assert catalog.prompt_block(profile, ["skill_view"]) is block and catalog.scan() is scan
    assert catalog.prompt_block(profile, ["todo"]) == ""
    assert catalog.prompt_block(profile, ["skill_write"]).startswith("After a task that took several tool calls")
