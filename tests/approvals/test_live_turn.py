"""Approval in a live turn (issue 20 item 2): the turn pauses at an ask-class call, the user's
decision (or Stop, or the clock) settles it, and the audit log keeps every decision."""
from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from tests.approvals.conftest import audit_rows, decide, run_turn, tool_results
from tests.support.agent_env import types

pytestmark = pytest.mark.django_db(transaction=True)

ECHO = {"name": "terminal", "arguments": {"command": "echo navi-was-here"}}


@pytest.fixture
async def env(agent_env):
    await agent_env.set_profile(enabled_tools=["terminal", "todo", "filesystem", "http_request", "web_view",
                                               "spawn_agent", "schedule_recall"])
    return agent_env


async def test_approve_once_runs_the_call_and_is_audited(env) -> None:
    env.fake.script(tool_calls=[ECHO])
    env.fake.script(text="Done.")
    events = await run_turn(env.session_id, "say hi in the terminal", on_approval=decide(env.user))
    assert types(events) == ["tool_started", "approval_required", "approval_resolved", "tool_call", "stream_delta",
                             "stream_end"]
    required, resolved, call = events[1], events[2], events[3]
    assert required["tool"] == "terminal" and required["args"] == {"command": "echo navi-was-here"}
    assert required["reason"] == "runs a program on the Navi server"
    assert required["touches"] == "`echo navi-was-here`" and required["tainted_by"] == []
    assert required["expires_at"] and required["is_subagent"] is False
    assert resolved == {"type": "approval_resolved", "approval_id": required["approval_id"], "decision": "approved",
                        "scope": "once", "decided_by": "alice", "reason": "", "is_subagent": False}
    assert call["success"] is True and "navi-was-here" in call["result"]
    [row] = await sync_to_async(audit_rows)()
    assert (row.tool, row.decision, row.decided_by_id, row.ran, row.success) == ("terminal", "approved", env.user.pk,
                                                                                 True, True)
    assert "navi-was-here" in row.result_excerpt and str(row.session_id) == env.session_id
    assert str(row.approval_id) == required["approval_id"]


async def test_deny_with_a_reason_never_runs_and_tells_the_model(env, tmp_path) -> None:
    marker = tmp_path / "never"
    env.fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": f"ls {marker}"}}])
    env.fake.script(text="OK, I will not.")
    events = await run_turn(env.session_id, "list it", on_approval=decide(env.user, "deny", reason="not now"))
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["success"] is False
    assert call["result"].startswith("Not run: the user denied this terminal call. Their reason: not now")
    assert tool_results(env) == [call["result"]]  # the model was told exactly that
    resolved = next(e for e in events if e["type"] == "approval_resolved")
    assert resolved["decision"] == "denied" and resolved["reason"] == "not now"
    [row] = await sync_to_async(audit_rows)()
    assert (row.decision, row.ran, row.reason) == ("denied", False, "not now")


async def test_approve_for_the_session_allows_exactly_that_call_later(env) -> None:
    env.fake.script(tool_calls=[ECHO])
    env.fake.script(text="Done.")
    await run_turn(env.session_id, "first", on_approval=decide(env.user, scope="session"))
    # The same call in a later turn runs without asking; another command asks again.
    env.fake.script(tool_calls=[ECHO])
    env.fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": "echo other"}}])
    env.fake.script(text="Done again.")
    asked: list[dict] = []
    events = await run_turn(env.session_id, "again", on_approval=lambda ev: asked.append(ev) or decide(env.user)(ev))
    assert [e["args"]["command"] for e in asked] == ["echo other"]
    assert [e["success"] for e in events if e["type"] == "tool_call"] == [True, True]
    rows = await sync_to_async(audit_rows)()
    assert [r.decision for r in rows] == ["approved_session", "allowed_grant", "approved"]
    assert rows[1].ran and rows[1].success and rows[1].decided_by_id is None


async def test_expiry_counts_as_deny_with_a_clear_message(env, settings) -> None:
    settings.APPROVAL_TIMEOUT_SECONDS = 1
    env.fake.script(tool_calls=[ECHO])
    env.fake.script(text="Nobody answered.")
    events = await run_turn(env.session_id, "try", on_approval=lambda ev: None)
    resolved = next(e for e in events if e["type"] == "approval_resolved")
    assert resolved["decision"] == "expired" and resolved["decided_by"] == ""
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["success"] is False
    assert call["result"].startswith("Not run: nobody approved this terminal call within 1 seconds, so it counts "
                                     "as denied.")
    assert events[-1]["type"] == "stream_end"
    [row] = await sync_to_async(audit_rows)()
    assert (row.decision, row.ran) == ("expired", False)


async def test_stop_during_a_pending_approval_cancels_it(env) -> None:
    stop = asyncio.Event()
    env.fake.script(tool_calls=[ECHO])
    env.fake.script(text="never reached")
    started = asyncio.get_running_loop().time()
    events = await run_turn(env.session_id, "try", on_approval=lambda ev: stop.set(), stop_event=stop)
    assert asyncio.get_running_loop().time() - started < 3
    assert types(events) == ["tool_started", "approval_required", "approval_resolved", "tool_call", "stream_stopped"]
    assert events[2]["decision"] == "cancelled" and events[2]["reason"] == "stopped by the user"
    assert events[3]["result"] == "Error: stopped by the user before this tool ran."
    from approvals_app.models import Approval

    approval = await sync_to_async(Approval.objects.get)(pk=events[1]["approval_id"])
    assert approval.status == "cancelled"
    [row] = await sync_to_async(audit_rows)()
    assert row.decision == "cancelled" and not row.ran
    assert len(env.fake.chat_requests) == 1  # the model was not asked again


async def test_an_allowed_tool_asks_nothing_and_writes_no_audit(env) -> None:
    env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    env.fake.script(text="Empty list.")
    events = await run_turn(env.session_id, "todo?", on_approval=lambda ev: pytest.fail("asked"))
    assert types(events) == ["tool_started", "tool_call", "stream_delta", "stream_end"]
    assert await sync_to_async(audit_rows)() == []
