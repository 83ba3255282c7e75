"""Durable turns (issue 21): what a turn streams is saved while it runs, a turn cut off by a crash
is closed as interrupted (partial answer kept, unfinished tools answered, never re-run), and a
model error keeps the partial answer and the error in the history. Both tiers.

The crash itself (SIGKILL of a live server) is in tests/faults/; here the recovery is driven
directly with a turn row whose process is dead.
"""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sessions_app.models import Message, RunningTurn
from sessions_app.runs import RunRegistry, TurnRequest
from sessions_app.services import message_append
from sessions_app.turns import TOOL_INTERRUPTED, turns_recover

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "The quick brown fox jumps over the lazy dog. " * 6  # 270 characters


def _display(session_id: str) -> list[dict[str, Any]]:
    from sessions_app.models import Session
    from sessions_app.selectors import display_messages, message_to_dict

    return [message_to_dict(m) for m in display_messages(session=Session.objects.get(pk=session_id))]


async def test_the_streamed_answer_is_saved_while_it_streams(agent_env: Any, registry: RunRegistry) -> None:
    """At most ~1 s of a streaming answer is ever only in memory; the finished turn leaves no row."""
    agent_env.fake.script(text=LONG, token_size=3, delay_between_chunks=0.03)  # ~2.7 s of streaming
    run = await registry.start_turn(TurnRequest(session_id=agent_env.session_id, text="tell me",
                                                user_id=agent_env.user.pk, user_role="staff"))
    saved = ""
    for _ in range(300):
        await asyncio.sleep(0.02)
        row = await RunningTurn.objects.filter(run_id=run.run_id).afirst()
        if row is not None and row.partial_text:
            saved = row.partial_text
            break
    assert saved and LONG.startswith(saved) and len(saved) < len(LONG), "nothing was saved while streaming"
    await asyncio.wait_for(asyncio.shield(run.done), 20)
    assert not await RunningTurn.objects.filter(session_id=agent_env.session_id).aexists()
    messages = await sync_to_async(_display)(agent_env.session_id)
    assert [(m["role"], m["content"], m["interrupted"]) for m in messages] == [
        ("user", "tell me", False), ("assistant", LONG.strip(), False)]


async def test_a_model_error_mid_stream_keeps_the_partial_answer_and_the_error(
        agent_env: Any, registry: RunRegistry) -> None:
    agent_env.fake.script(text=LONG, token_size=10, drop_after_chunks=6)
    result = await registry.run_turn(TurnRequest(session_id=agent_env.session_id, text="tell me",
                                                 user_id=agent_env.user.pk, user_role="staff"))
    assert result.error
    messages = await sync_to_async(_display)(agent_env.session_id)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    answer = messages[-1]
    assert answer["content"] and LONG.startswith(answer["content"])  # what the user saw streaming
    assert answer["metadata"]["error"] == result.error
    assert not await RunningTurn.objects.filter(session_id=agent_env.session_id).aexists()
    # The partial answer is in the model's context: "Continue" picks up from it.
    context = await agent_env.messages("context")
    assert [m.role for m in context] == ["user", "assistant"] and context[-1].content == answer["content"]


async def test_a_model_error_before_any_text_is_still_in_the_history(agent_env: Any, registry: RunRegistry) -> None:
    agent_env.fake.script(http_status=500, error="model crashed")
    result = await registry.run_turn(TurnRequest(session_id=agent_env.session_id, text="hi",
                                                 user_id=agent_env.user.pk, user_role="staff"))
    messages = await sync_to_async(_display)(agent_env.session_id)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[-1]["content"] == "" and messages[-1]["metadata"]["error"] == result.error
    assert [m.role for m in await agent_env.messages("context")] == ["user"]  # no empty answer for the model


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _crashed_turn(session_id: str, *, owner: str, partial: str, alive_for: float = 60) -> str:
    """A turn as a killed process leaves it: its user message, a tool call without a result, the
    start of the next answer only in its row."""
    run_id = "deadbeef" + os.urandom(4).hex()
    message_append(session_id=session_id, role="user", content="check the disk", run_id=run_id)
    message_append(session_id=session_id, role="assistant", content="", run_id=run_id,
                   tool_calls=[{"id": "call_1", "name": "terminal", "arguments": {"command": "df -h"}}])
    RunningTurn.objects.create(session_id=session_id, run_id=run_id, owner=owner, partial_text=partial,
                               partial_thinking="thinking…",
                               alive_until=timezone.now() + timedelta(seconds=alive_for))
    return run_id


def test_recovery_closes_a_dead_processes_turn_as_interrupted(agent_env: Any) -> None:
    sid = agent_env.session_id
    run_id = _crashed_turn(sid, owner=f"{socket.gethostname()}:{_dead_pid()}:0000", partial="The disk is 80 %")
    assert [t.session_id for t in turns_recover()] == [sid]
    messages = _display(sid)
    assert [(m["role"], m["interrupted"]) for m in messages] == [
        ("user", True), ("assistant", False), ("tool", False), ("assistant", True)]
    tool, answer = messages[2], messages[3]
    assert tool["content"] == TOOL_INTERRUPTED and tool["tool_call_id"] == "call_1"
    assert tool["metadata"] == {"interrupted": True, "success": False}
    assert answer["content"] == "The disk is 80 %" and answer["thinking"] == "thinking…"
    assert answer["metadata"] == {"interrupted": True}
    assert not RunningTurn.objects.filter(run_id=run_id).exists()
    assert turns_recover() == []  # closed once
    assert len(_display(sid)) == 4


def test_recovery_leaves_live_turns_alone_and_closes_expired_leases(agent_env: Any) -> None:
    sid = agent_env.session_id
    # Another machine's turn with a valid lease: may be running.
    _crashed_turn(sid, owner="elsewhere:123:abcd", partial="")
    assert turns_recover() == []
    # This host, a live process (ours, under another token: a turn of another process of ours is
    # only known dead by its lease).
    assert RunningTurn.objects.update(owner=f"{socket.gethostname()}:{os.getppid()}:abcd") == 1
    assert turns_recover() == []
    # The lease ran out: closed, even on another machine.
    RunningTurn.objects.update(owner="elsewhere:123:abcd", alive_until=timezone.now() - timedelta(seconds=1))
    assert [t.session_id for t in turns_recover()] == [sid]
    last = _display(sid)[-1]
    assert last["role"] == "assistant" and last["interrupted"] and last["content"] == ""
    # An empty interrupted answer is shown, not sent to the model.
    assert Message.objects.get(pk=last["id"]).buffer == Message.Buffer.MESSAGES


class _Client:
    """REST from the test's event loop (a turn a view starts runs on it), authenticated by a token."""

    def __init__(self, user: Any) -> None:
        from django.test import AsyncClient

        from tests.support.users import token_for

        self.client = AsyncClient()
        self.headers = {"Authorization": f"Bearer {token_for(user)}"}

    async def post(self, path: str) -> Any:
        return await self.client.post(path, headers=self.headers)


def _client(user: Any) -> _Client:
    return _Client(user)


async def test_regenerate_answers_the_last_message_again_and_keeps_the_old_answer(
        agent_env: Any, registry: RunRegistry) -> None:
    client = await sync_to_async(_client)(agent_env.user)
    sid = agent_env.session_id
    resp = await client.post(f"/sessions/{sid}/regenerate")
    assert (resp.status_code, resp.json()["detail"]) == (400, "There is no message to answer again: send one first.")
    agent_env.fake.script(text=LONG, token_size=10, drop_after_chunks=4)
    await registry.run_turn(TurnRequest(session_id=sid, text="tell me", user_id=agent_env.user.pk, user_role="staff"))
    old = await sync_to_async(_display)(sid)
    assert old[-1]["metadata"].get("error")
    agent_env.fake.script(text="A complete answer.")
    resp = await client.post(f"/sessions/{sid}/regenerate")
    assert resp.status_code == 202, resp.content
    await asyncio.sleep(0)
    assert await registry.wait_idle(sid, 20)
    now = await sync_to_async(_display)(sid)
    assert [(m["role"], m["content"]) for m in now] == [("user", "tell me"), ("assistant", "A complete answer.")]
    assert now[0]["seq"] > old[-1]["seq"]
    archived = [seq async for seq in Message.objects.filter(session_id=sid, buffer=Message.Buffer.ARCHIVED)
                .order_by("seq").values_list("seq", flat=True)]
    assert archived == [m["seq"] for m in old]  # kept, not deleted
    context = await agent_env.messages("context")
    assert [(m.role, m.content) for m in context] == [("user", "tell me"), ("assistant", "A complete answer.")]
    # The model was sent the question once, without the failed answer.
    sent = agent_env.fake.last_chat["json"]["messages"]
    assert [m["role"] for m in sent if m["role"] != "system"] == ["user"]


async def test_regenerate_is_refused_while_a_turn_runs(agent_env: Any, registry: RunRegistry) -> None:
    client = await sync_to_async(_client)(agent_env.user)
    agent_env.fake.script(text="slow " * 20, token_size=5, delay_between_chunks=0.05)
    run = await registry.start_turn(TurnRequest(session_id=agent_env.session_id, text="hi",
                                                user_id=agent_env.user.pk, user_role="staff"))
    resp = await client.post(f"/sessions/{agent_env.session_id}/regenerate")
    assert resp.status_code == 409 and "already running" in resp.json()["detail"]
    await asyncio.wait_for(asyncio.shield(run.done), 20)
