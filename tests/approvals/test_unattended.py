"""Unattended runs (issue 20 item 4): a recall's own rules — allowlist, limits, and a call that
needs approval denied (default) or parked until the user approves — through the real run registry."""
from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.gate import RunRules
from tests.approvals.conftest import audit_rows

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def env(agent_env, monkeypatch):
    from recall_app import enqueue
    from sessions_app import runs

    monkeypatch.setattr(enqueue, "fire_occurrence", lambda *a, **k: None)  # no broker here; nothing is due later

    await agent_env.set_profile(enabled_tools=["terminal", "http_request", "todo"])
    runs.set_run_registry(runs.RunRegistry(store=runs.LocalStore()))
    yield agent_env
    runs.set_run_registry(None)


def offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


async def pending_approval(session_id: str, within: float = 20.0) -> Any:
    from approvals_app.models import Approval

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        row = await sync_to_async(Approval.objects.filter(session_id=session_id, status="pending").first)()
        if row is not None:
            return row
        await asyncio.sleep(0.02)
    raise AssertionError("no approval was opened")


def make_recall(session_id: str, **fields: Any) -> Any:
    from django.utils import timezone

    from recall_app.models import Recall

    return Recall.objects.create(session_id=session_id, call_type="once", trigger_at=timezone.now().replace(microsecond=0),
                                 additional_context_message="Post the report to the team endpoint.", **fields)


def fire(recall_id: str) -> str:
    from recall_app import firing

    return firing.fire_recall(recall_id)


async def test_default_rules_deny_a_call_that_needs_approval(env, web) -> None:
    env.fake.script(tool_calls=[{"name": "http_request", "arguments": {
        "url": web.sink("/report"), "method": "POST", "body": "weekly report"}}])
    env.fake.script(text="Could not post: it needs approval.")
    recall = await sync_to_async(make_recall)(env.session_id)
    outcome = await sync_to_async(fire, thread_sensitive=False)(str(recall.id))
    assert outcome == "success"
    assert web.hits == []
    # The default allowlist: the profile's tools minus those that always need approval.
    assert sorted(offered(env.requests()[0])) == ["http_request", "todo"]
    told = [m["content"] for m in env.requests()[-1]["messages"] if m["role"] == "tool"]
    assert told[0].startswith("Not run: this is an unattended run (the once recall ")
    assert "this recall's rules deny such calls instead of waiting" in told[0]
    [row] = await sync_to_async(audit_rows)()
    assert (row.decision, row.origin, row.ran, row.tool) == ("denied_unattended", "recall", False, "http_request")
    from approvals_app.models import Approval

    assert await sync_to_async(Approval.objects.count)() == 0


async def test_a_tool_outside_the_allowlist_is_not_offered_and_not_run(env) -> None:
    env.fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": "echo sneaky"}}])
    env.fake.script(text="done")
    from sessions_app.runs import run_recall_turn

    outcome = await run_recall_turn(env.session_id, user_id=env.user.pk, content="go",
                                    rules=RunRules(tools=frozenset({"todo"})))
    assert outcome == "success"
    assert offered(env.requests()[0]) == ["todo"]
    told = [m["content"] for m in env.requests()[-1]["messages"] if m["role"] == "tool"]
    assert told[0].startswith("Error: tool 'terminal' is not enabled for this profile")


async def test_park_waits_for_the_user_and_approving_resumes_it(env) -> None:
    from recall_app import selectors
    from recall_app.models import Recall, RecallRun
    from sessions_app.models import Session

    env.fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": "echo parked-run"}}])
    env.fake.script(text="Report: the run went on after approval.")
    recall = await sync_to_async(make_recall)(env.session_id, on_approval="park", allowed_tools=["terminal", "todo"])
    firing = asyncio.ensure_future(sync_to_async(fire, thread_sensitive=False)(str(recall.id)))
    try:
        approval = await pending_approval(env.session_id)
        assert approval.origin == "recall" and approval.tool == "terminal"

        def banner() -> tuple[dict[str, Any], str]:
            session = Session.objects.get(pk=env.session_id)
            waiting = selectors.recall_waiting(session=session)
            return (selectors.recall_to_dict(waiting) if waiting else {},
                    RecallRun.objects.get(recall_id=recall.id).outcome)

        deadline = time.monotonic() + 20  # the run history says so once the approval is announced
        shown, outcome = await sync_to_async(banner)()
        # banner() reads the recall before the run: wait until one read saw both parked.
        while (outcome != "waiting_approval" or "waiting_approval" not in shown) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            shown, outcome = await sync_to_async(banner)()
        assert outcome == "waiting_approval"
        assert shown["waiting_approval"]["approval_id"] == str(approval.pk)
        assert shown["waiting_approval"]["tool"] == "terminal" and shown["status"] == "pending" and shown["firing"]
        assert not firing.done()

        from approvals_app.services import approval_decide

        await sync_to_async(approval_decide)(user=env.user, approval_id=approval.pk, decision="approve")
        assert await asyncio.wait_for(asyncio.shield(firing), 30) == "success"
    finally:
        if not firing.done():  # a failed assertion must not leave the run going into the next test
            from sessions_app.runs import arequest_stop

            await arequest_stop(env.session_id)
            await asyncio.wait({firing}, timeout=30)
    run = await sync_to_async(RecallRun.objects.get)(recall_id=recall.id)
    assert (run.outcome, run.approval_id) == ("success", None)
    assert (await sync_to_async(Recall.objects.get)(pk=recall.id)).status == "fired"
    told = [m["content"] for m in env.requests()[-1]["messages"] if m["role"] == "tool"]
    assert "parked-run" in told[0]
    [row] = await sync_to_async(audit_rows)()
    assert (row.decision, row.origin, row.ran, row.success) == ("approved", "recall", True, True)


async def test_a_parked_run_that_nobody_approves_goes_on_without_the_call(env, settings) -> None:
    settings.RECALL_APPROVAL_WAIT_SECONDS = 1
    env.fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": "echo x"}}])
    env.fake.script(text="Report: the step needs approval.")
    from sessions_app.runs import run_recall_turn

    outcome = await run_recall_turn(env.session_id, user_id=env.user.pk, content="go",
                                    rules=RunRules(tools=frozenset({"terminal"}), on_approval="park"))
    assert outcome == "success"
    told = [m["content"] for m in env.requests()[-1]["messages"] if m["role"] == "tool"]
    assert told[0].startswith("Not run: nobody approved this terminal call within 1 seconds")


async def test_the_time_limit_stops_work_but_not_waiting(env) -> None:
    from sessions_app.runs import run_recall_turn

    env.fake.script(text="slow " * 200, token_size=5, delay_between_chunks=0.05)  # ~10 s of streaming
    started = time.monotonic()
    outcome = await run_recall_turn(env.session_id, user_id=env.user.pk, content="write a lot",
                                    rules=RunRules(max_seconds=0.5))
    assert outcome == "time_limit" and time.monotonic() - started < 5

    env.fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": "echo y"}}])
    env.fake.script(text="done")
    run = asyncio.ensure_future(run_recall_turn(
        env.session_id, user_id=env.user.pk, content="go",
        rules=RunRules(tools=frozenset({"terminal"}), on_approval="park", max_seconds=0.6)))
    try:
        approval = await pending_approval(env.session_id)
        await asyncio.sleep(1.0)  # parked longer than the whole time limit
        from approvals_app.services import approval_decide

        await sync_to_async(approval_decide)(user=env.user, approval_id=approval.pk, decision="approve")
        assert await asyncio.wait_for(asyncio.shield(run), 30) == "success"
    finally:
        if not run.done():
            from sessions_app.runs import arequest_stop

            await arequest_stop(env.session_id)
            await asyncio.wait({run}, timeout=30)


async def test_max_iterations_caps_the_profile(env) -> None:
    from sessions_app.runs import run_recall_turn

    env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    outcome = await run_recall_turn(env.session_id, user_id=env.user.pk, content="go",
                                    rules=RunRules(max_iterations=1))
    assert outcome == "max_iterations"
    assert len(env.fake.chat_requests) == 1


async def test_the_agent_declares_a_recalls_rules_when_it_schedules_it(env) -> None:
    from recall_app.models import Recall
    from tests.approvals.conftest import run_turn

    await env.set_profile(enabled_tools=["terminal", "todo", "schedule_recall"])
    env.fake.script(tool_calls=[{"name": "schedule_recall", "arguments": {
        "call_type": "once", "when": "2h", "additional_context_message": "Check the disk with terminal (df -h).",
        "on_approval": "park", "max_seconds": 120, "allowed_tools": ["terminal"]}}])
    env.fake.script(text="Scheduled.")
    events = await run_turn(env.session_id, "check the disk in two hours, and wait for me if it needs approval")
    assert [e["success"] for e in events if e["type"] == "tool_call"] == [True]
    recall = await sync_to_async(Recall.objects.get)(session_id=env.session_id)
    assert (recall.on_approval, recall.max_seconds, recall.allowed_tools, recall.max_iterations) == (
        "park", 120, ["terminal"], None)
