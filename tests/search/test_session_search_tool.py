"""The session_search tool through the fake model: the agent looks up past conversations of its
own user only, gets titles, dates and snippets compactly, and the policy lets it run unasked."""
from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services

pytestmark = pytest.mark.django_db(transaction=True)


def _past(owner, title, *texts):
    session = services.session_create(owner=owner, title=title)
    for role, text in texts:
        services.message_append(session_id=session.id, role=role, content=text)
    return session


async def test_the_agent_finds_a_past_decision(agent_env) -> None:
    from tests.support.users import make_user

    await agent_env.set_profile(enabled_tools=["session_search", "todo"])
    past = await sync_to_async(_past)(agent_env.user, "NAS backup",
                                      ("user", "Should the NAS backup run nightly or weekly?"),
                                      ("assistant", "We decided: the NAS backup runs nightly at 02:00, kept 14 days."))
    mallory = await sync_to_async(make_user)("mallory")
    await sync_to_async(_past)(mallory, "Mallory's NAS backup", ("user", "my NAS backup password is hunter2"))
    agent_env.fake.script(tool_calls=[{"name": "session_search", "arguments": {"query": "NAS backup"}}])
    agent_env.fake.script(text="It runs nightly at 02:00.")
    events = await agent_env.run("what did we decide about the NAS backup?")
    (call,) = [e for e in events if e["type"] == "tool_call"]
    assert call["success"] is True
    day = past.created_at.date().isoformat()
    lines = call["result"].splitlines()
    assert lines[0] == "Past conversations matching 'NAS backup', best first:"
    assert lines[1] == f'- "NAS backup" ({day}, session {str(past.id)[:8]})'
    assert sorted(lines[2:]) == sorted([
        f"  {day} user: Should the NAS backup run nightly or weekly?",
        f"  {day} you: We decided: the NAS backup runs nightly at 02:00, kept 14 days."])
    assert "hunter2" not in call["result"] and "Mallory" not in call["result"]
    # The running conversation's own messages are already in the context: they are not listed.
    assert "what did we decide" not in call["result"]
    assert not [e for e in events if e["type"] == "approval_required"]


async def test_bad_queries_come_back_as_tool_errors_the_model_can_fix(agent_env) -> None:
    await agent_env.set_profile(enabled_tools=["session_search"])
    agent_env.fake.script(tool_calls=[{"name": "session_search", "arguments": {"query": "*** ()"}}])
    agent_env.fake.script(tool_calls=[{"name": "session_search", "arguments": {"query": "x" * 10_000}}])
    agent_env.fake.script(tool_calls=[{"name": "session_search", "arguments": {"query": "zebra"}}])
    agent_env.fake.script(text="Nothing found.")
    events = await agent_env.run("search")
    results = [(e["success"], e["result"]) for e in events if e["type"] == "tool_call"]
    assert results == [
        (False, "Error: Type a word to search for: the search has no letters or digits in it. "
                "Give 'query' as a few plain words."),
        (False, "Error: The search is too long (10000 characters): use at most 500. Give 'query' as a few plain words."),
        (True, "No past conversation mentions 'zebra'. Try other or fewer words."),
    ]


def test_the_policy_allows_it_even_in_a_tainted_turn() -> None:
    from agent.gate import CallCheck
    from approvals_app.policy import classify

    check = CallCheck(tool="session_search", args={"query": "backup"}, session_id="s", run_id="r", user_id=1,
                      user_role="user", profile_id="secretary", is_subagent=False,
                      tainted_by=("a web page (example.com)",), fetched_hosts=frozenset(), rules=None)
    verdict = classify(check, [], session_dir=None)
    assert (verdict.decision, verdict.audited) == ("allow", False)


@pytest.mark.django_db(transaction=False)
def test_the_documented_profiles_offer_it() -> None:
    """The data migration added it (a transactional test would have flushed the migration's rows)."""
    from profiles_app.models import AgentProfile

    for pid in ("secretary", "server_admin", "smart_home"):
        assert "session_search" in AgentProfile.objects.get(pk=pid).enabled_tools
