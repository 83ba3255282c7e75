"""The JSON export's plan and last turn after a real turn (through the fake model), from the
server and from `manage.py export_sessions`: the command sees the replay log in scale-out (Redis),
and says it cannot in the embedded tier (the log lives in the server's memory)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from sessions_app.runs import RunRegistry, TurnRequest

pytestmark = pytest.mark.django_db(transaction=True)


async def test_json_export_has_the_plan_and_the_seq_numbered_events_of_the_last_turn(
        agent_env: Any, registry: RunRegistry, tmp_path: Path) -> None:
    from django.core.management import call_command
    from django.test import AsyncClient

    from tests.support.users import token_for

    await agent_env.set_profile(enabled_tools=["todo"])
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "set", "steps": ["Look", "Report"]}}])
    agent_env.fake.script(text="Planned.")
    await registry.run_turn(TurnRequest(session_id=agent_env.session_id, text="plan the backup check",
                                        user_id=agent_env.user.pk, user_role="staff"))
    token = await sync_to_async(token_for)(agent_env.user)
    resp = await AsyncClient().get(f"/sessions/{agent_env.session_id}/export?format=json",
                                   headers={"Authorization": f"Bearer {token}"})
    doc = json.loads(b"".join([chunk async for chunk in resp.streaming_content]))
    assert [(s["title"], s["status"]) for s in doc["plan"]["todo"]] == [("Look", "pending"), ("Report", "pending")]
    events = doc["last_turn"]["events"]
    assert doc["last_turn"]["available"] is True
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "stream_start" and "tool_call" in kinds and "stream_end" in kinds
    assert "".join(e["delta"] for e in events if e["type"] == "stream_delta") == "Planned."

    out = tmp_path / "backup"
    await sync_to_async(call_command)("export_sessions", user=agent_env.user.username, format="json", out=str(out))
    (path,) = [p for p in out.iterdir() if agent_env.session_id[:8] in p.name]
    backup = json.loads(path.read_text())
    assert backup["plan"] == doc["plan"]
    if settings.REDIS_URL:
        assert backup["last_turn"] == doc["last_turn"]
    else:
        assert backup["last_turn"] == {"available": False, "events": []}
