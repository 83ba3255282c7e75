"""The rough edges a newcomer hit (issue 21), each pinned by a test that failed before the fix.

Others live next to their feature: durable turns and model errors (test_durable_turns.py, the
browser's test_durable.py), honest health (test_health.py), the recall event order
(tests/recall/test_live.py) and ``fire_recall`` handing over to the running server
(tests/faults/test_handover.py).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from sessions_app.runs import RunRegistry, TurnRequest

ROOT = Path(__file__).resolve().parent.parent


def _planner_calls(fake: Any) -> list[Any]:
    return [r for r in fake.chat_requests
            if any("planning module" in str(m.get("content")) for m in r.json.get("messages", []))]


@pytest.mark.django_db(transaction=True)
def test_post_messages_runs_without_the_planning_phase(agent_env: Any, registry: RunRegistry) -> None:
    """spec: the non-streaming run() has no planning phase; a streamed turn of the same profile does."""
    from profiles_app.models import AgentProfile
    from tests.support.users import ApiClient, token_for

    AgentProfile.objects.filter(pk="tester").update(planning_enabled=True)
    api = ApiClient(token_for(agent_env.user))
    resp = api.post(f"/sessions/{agent_env.session_id}/messages", {"content": "Research the topic in depth"})
    assert resp.status_code == 200, resp.content
    assert _planner_calls(agent_env.fake) == []
    assert not any(m.is_plan for m in async_to_sync(agent_env.messages)())
    # The same request streamed (WebSocket turns) does plan.
    async_to_sync(registry.run_turn)(TurnRequest(session_id=agent_env.session_id, text="Research the topic in depth",
                                                 user_id=agent_env.user.pk, user_role="staff"))
    assert _planner_calls(agent_env.fake) != []


@pytest.mark.django_db(transaction=True)
async def test_a_non_staff_user_is_told_why_a_tool_is_refused(agent_env: Any) -> None:
    """terminal is in the profile but only staff may run it: the model (and the tool card) hear
    that, not "not enabled for this profile"."""
    from django.contrib.auth import get_user_model

    await agent_env.set_profile(enabled_tools=["terminal", "todo"])
    await sync_to_async(get_user_model().objects.filter(pk=agent_env.user.pk).update)(is_staff=False, is_superuser=False)
    agent_env.fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": "df -h"}}])
    agent_env.fake.script(text="I may not run that.")
    events = await agent_env.run("how full is the disk?")
    [call] = [e for e in events if e["type"] == "tool_call"]
    assert call["success"] is False
    assert "only staff users may run it" in call["result"], call["result"]
    assert "not enabled for this profile" not in call["result"]


@pytest.mark.django_db(transaction=True)
async def test_a_tool_the_profile_does_not_enable_is_still_refused_as_such(agent_env: Any) -> None:
    await agent_env.set_profile(enabled_tools=["todo"])
    agent_env.fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": "df -h"}}])
    agent_env.fake.script(text="ok")
    events = await agent_env.run("how full is the disk?")
    [call] = [e for e in events if e["type"] == "tool_call"]
    assert "not enabled for this profile" in call["result"]


def test_ssh_password_env_is_read_from_dotenv(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings are documented as read from the environment and .env: so is an SSH host's password."""
    from tools_app.builtins.ssh_exec import _auth
    from tools_app.safety.ssh_hosts import SshHost

    monkeypatch.delenv("WEB1_SSH_PASSWORD", raising=False)
    dotenv = tmp_path / ".env"
    dotenv.write_text("WEB1_SSH_PASSWORD='s3cret pass'\n")
    settings.NAVI_DOTENV = dotenv
    host = SshHost(name="web1", host="10.0.0.5", port=22, username="deploy", key_file=None,
                   password_env="WEB1_SSH_PASSWORD")
    assert _auth(host)["password"] == "s3cret pass"
    monkeypatch.setenv("WEB1_SSH_PASSWORD", "from the environment")  # the environment wins, as for settings
    assert _auth(host)["password"] == "from the environment"
    monkeypatch.delenv("WEB1_SSH_PASSWORD")
    dotenv.write_text("")
    from tools_app.base import ToolError

    with pytest.raises(ToolError, match=r"WEB1_SSH_PASSWORD.*neither in the environment nor in .*\.env"):
        _auth(host)


def test_readme_says_how_to_choose_the_port() -> None:
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up and run", 1)[1].split("\n## ", 1)[0]
    assert "--port" in setup and "NAVI_PORT" in setup
    assert len(re.findall(r"^python3\.11 navi\.py", setup, re.M)) == 2  # still exactly two set-up commands
