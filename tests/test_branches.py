"""Edit the last message and regenerate the last answer (issue 22): the old version is kept as a
branch that can be viewed, over REST; bad input changes nothing. Both tiers."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import Message
from sessions_app.runs import RunRegistry, TurnRequest

pytestmark = pytest.mark.django_db(transaction=True)


class _Client:
    """REST from the test's event loop (a turn a view starts runs on it), authenticated by a token."""

    def __init__(self, user: Any) -> None:
        from django.test import AsyncClient

        from tests.support.users import token_for

        self.client = AsyncClient()
        self.headers = {"Authorization": f"Bearer {token_for(user)}"}

    async def post(self, path: str, body: Any = None) -> Any:
        if body is None:
            return await self.client.post(path, headers=self.headers)
        return await self.client.post(path, data=json.dumps(body), content_type="application/json",
                                      headers=self.headers)

    async def get(self, path: str) -> Any:
        return await self.client.get(path, headers=self.headers)


async def _client(user: Any) -> _Client:
    return await sync_to_async(_Client)(user)


async def _turn(agent_env: Any, registry: RunRegistry, text: str, answer: str) -> None:
    agent_env.fake.script(text=answer)
    await registry.run_turn(TurnRequest(session_id=agent_env.session_id, text=text, user_id=agent_env.user.pk,
                                        user_role="staff"))


async def _shown(client: _Client, sid: str) -> list[dict[str, Any]]:
    resp = await client.get(f"/sessions/{sid}")
    assert resp.status_code == 200, resp.content
    return resp.json()["messages"]


async def _rows(sid: str) -> list[tuple[int, str, str, str | None]]:
    return [(m.seq, m.buffer, m.role, m.content) async for m in Message.objects.filter(session_id=sid).order_by("seq")]


async def test_edit_answers_the_new_text_and_keeps_the_old_version_as_a_branch(
        agent_env: Any, registry: RunRegistry) -> None:
    client = await _client(agent_env.user)
    sid = agent_env.session_id
    await _turn(agent_env, registry, "What is 2+2?", "Four.")
    await _turn(agent_env, registry, "And in French?", "Quatre.")
    shown = await _shown(client, sid)
    last_user = shown[-2]
    assert (last_user["content"], "branch" in last_user) == ("And in French?", False)

    agent_env.fake.script(text="Vier.")
    resp = await client.post(f"/sessions/{sid}/messages/{last_user['seq']}/edit", {"content": "And in German?"})
    assert resp.status_code == 202, resp.content
    await asyncio.sleep(0)
    assert await registry.wait_idle(sid, 20)
    shown = await _shown(client, sid)
    assert [(m["role"], m["content"]) for m in shown] == [
        ("user", "What is 2+2?"), ("assistant", "Four."), ("user", "And in German?"), ("assistant", "Vier.")]
    group = last_user["seq"]
    assert shown[2]["branch"] == {"group": group, "index": 2, "count": 2}
    assert "branch" not in shown[0]
    # The model saw the first exchange and the new text only, not the old version.
    sent = [(m["role"], m["content"]) for m in agent_env.fake.last_chat["json"]["messages"] if m["role"] != "system"]
    assert sent == [("user", "What is 2+2?"), ("assistant", "Four."), ("user", "And in German?")]

    old = (await client.get(f"/sessions/{sid}/branches/{group}?index=1")).json()
    assert (old["index"], old["count"], old["current"]) == (1, 2, False)
    assert [(m["role"], m["content"]) for m in old["messages"]] == [("user", "And in French?"), ("assistant", "Quatre.")]
    assert old["messages"][0]["branch"] == {"group": group, "index": 1, "count": 2}
    assert "archived_buffer" not in old["messages"][1]["metadata"]
    new = (await client.get(f"/sessions/{sid}/branches/{group}?index=2")).json()
    assert new["current"] and [m["content"] for m in new["messages"]] == ["And in German?", "Vier."]

    # Regenerating the edited exchange adds a third version of the same group.
    agent_env.fake.script(text="Vier!")
    assert (await client.post(f"/sessions/{sid}/regenerate")).status_code == 202
    await asyncio.sleep(0)
    assert await registry.wait_idle(sid, 20)
    shown = await _shown(client, sid)
    assert [m["content"] for m in shown[2:]] == ["And in German?", "Vier!"]
    assert shown[2]["branch"] == {"group": group, "index": 3, "count": 3}
    second = (await client.get(f"/sessions/{sid}/branches/{group}?index=2")).json()
    assert [m["content"] for m in second["messages"]] == ["And in German?", "Vier."]
    # Nothing was deleted: every row of every version is still there.
    contents = [c for _, _, _, c in await _rows(sid)]
    for text in ("And in French?", "Quatre.", "Vier.", "Vier!"):
        assert text in contents


async def test_editing_a_message_that_is_not_the_last_is_refused_and_changes_nothing(
        agent_env: Any, registry: RunRegistry) -> None:
    client = await _client(agent_env.user)
    sid = agent_env.session_id
    await _turn(agent_env, registry, "first", "one")
    await _turn(agent_env, registry, "second", "two")
    before = await _rows(sid)
    first = before[0][0]
    resp = await client.post(f"/sessions/{sid}/messages/{first}/edit", {"content": "changed"})
    assert resp.status_code == 409
    assert resp.json()["detail"].startswith(f"Only your last message (#{before[2][0]}) can be edited; message #{first}")
    assistant = before[1][0]
    resp = await client.post(f"/sessions/{sid}/messages/{assistant}/edit", {"content": "changed"})
    assert (resp.status_code, resp.json()["detail"]) == (
        404, f"Message #{assistant} is not one of your messages in this conversation.")
    last = before[2][0]
    resp = await client.post(f"/sessions/{sid}/messages/{last}/edit", {"content": "  \n"})
    assert (resp.status_code, resp.json()["detail"]) == (400, "The edited message is empty: type the new text in 'content'.")
    resp = await client.post(f"/sessions/{sid}/messages/{last}/edit", {"content": "x" * 100_001})
    assert resp.status_code == 400 and "the limit is 100000" in resp.json()["detail"]
    resp = await client.get(f"/sessions/{sid}/branches/{last}?index=1")
    assert (resp.status_code, resp.json()["detail"]) == (404, f"Message #{last} has no other versions in this conversation.")
    assert await _rows(sid) == before
    assert not await registry.ais_busy(sid)


async def test_edit_and_regenerate_are_refused_while_a_turn_runs(agent_env: Any, registry: RunRegistry) -> None:
    client = await _client(agent_env.user)
    sid = agent_env.session_id
    await _turn(agent_env, registry, "first", "one")
    before = await _rows(sid)
    agent_env.fake.script(text="slow " * 20, token_size=5, delay_between_chunks=0.05)
    run = await registry.start_turn(TurnRequest(session_id=sid, text="second", user_id=agent_env.user.pk,
                                                user_role="staff"))
    for path, body in ((f"/sessions/{sid}/messages/{before[0][0]}/edit", {"content": "new"}),
                       (f"/sessions/{sid}/regenerate", None)):
        resp = await client.post(path, body)
        assert resp.status_code == 409 and "already running" in resp.json()["detail"], resp.content
    await asyncio.wait_for(asyncio.shield(run.done), 20)
    rows = await _rows(sid)
    assert rows[: len(before)] == before and all(b != Message.Buffer.ARCHIVED for _, b, _, _ in rows)


async def test_another_users_session_cannot_be_edited_or_its_branches_read(agent_env: Any, registry: RunRegistry) -> None:
    from tests.support.users import make_user

    sid = agent_env.session_id
    await _turn(agent_env, registry, "mine", "yes")
    before = await _rows(sid)
    mallory = await sync_to_async(make_user)("mallory")
    client = await _client(mallory)
    for resp in (await client.post(f"/sessions/{sid}/messages/{before[0][0]}/edit", {"content": "x"}),
                 await client.post(f"/sessions/{sid}/regenerate"),
                 await client.get(f"/sessions/{sid}/branches/{before[0][0]}?index=1")):
        assert resp.status_code == 404 and resp.json()["detail"] == f"Session {sid} not found."
    assert await _rows(sid) == before
