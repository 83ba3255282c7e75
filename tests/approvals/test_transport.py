"""Approvals over the wire: the card replays on reconnect, a WebSocket frame or a REST call decides,
every tab sees the resolution, and bad input gets a clear error (issue 20 items 2 and "Bad input")."""
from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from tests.support.users import ApiClient, make_user, token_for
from tests.transport.helpers import connect, drain, receive_until, types

pytestmark = pytest.mark.django_db(transaction=True)

ECHO = {"name": "terminal", "arguments": {"command": "echo over-the-wire"}}


@pytest.fixture
async def env(agent_env):
    from sessions_app import runs

    await agent_env.set_profile(enabled_tools=["terminal", "todo"])
    runs.set_run_registry(None)  # the real registry (LocalStore embedded, Redis in scale-out), the real agent
    yield agent_env
    runs.set_run_registry(None)


async def _token(user: Any) -> str:
    return await sync_to_async(token_for)(user)


async def test_replay_shows_a_pending_approval_and_a_frame_decides_for_every_tab(env) -> None:
    env.fake.script(tool_calls=[ECHO])
    env.fake.script(text="Done over the wire.")
    token = await _token(env.user)
    first = await connect(env.session_id, token)
    await drain(first)
    await first.send_json_to({"type": "message", "content": "run echo"})
    seen = await receive_until(first, "approval_required")
    card = seen[-1]
    assert types(seen) == ["stream_start", "tool_started", "approval_required"]

    # A tab that opens now (no ?after) and one that reconnects from before the card both get it again.
    fresh = await connect(env.session_id, token)
    replay = await receive_until(fresh, "approval_required")
    assert replay[-1] == card
    resumed = await connect(env.session_id, token, after=seen[0]["seq"])
    assert (await receive_until(resumed, "approval_required"))[-1] == card

    await fresh.send_json_to({"type": "approval", "approval_id": card["approval_id"], "decision": "approve",
                              "scope": "once"})
    for tab in (first, fresh, resumed):
        rest = await receive_until(tab, "session_sync")
        assert types(rest) == ["approval_resolved", "tool_call", "stream_delta", "stream_end", "session_sync"]
        assert rest[0]["decision"] == "approved" and rest[0]["decided_by"] == "alice"
        assert rest[1]["success"] is True and "over-the-wire" in rest[1]["result"]
    for tab in (first, fresh, resumed):
        await tab.disconnect()


BAD_FRAMES = [
    ({"type": "approval"}, "Invalid approval frame: approval_id: Field required"),
    ({"type": "approval", "approval_id": "x", "decision": "maybe"}, "decision: Input should be 'approve' or 'deny'"),
    ({"type": "approval", "approval_id": "x", "decision": "approve", "scope": "forever"},
     "scope: Input should be 'once' or 'session'"),
    ({"type": "approval", "approval_id": "not-a-uuid", "decision": "approve", "ref": "r1"}, "No approval with id"),
    ({"type": "approval", "approval_id": "00000000-0000-0000-0000-000000000000", "decision": "deny"},
     "No approval with id"),
]


@pytest.mark.parametrize(("frame", "expected"), BAD_FRAMES, ids=[f"bad{i}" for i in range(len(BAD_FRAMES))])
async def test_bad_approval_frames_get_an_error_and_the_connection_stays(env, frame, expected) -> None:
    comm = await connect(env.session_id, await _token(env.user))
    await drain(comm)
    await comm.send_json_to(frame)
    [error] = await drain(comm)
    assert error["type"] == "error" and error["frame"] == "approval" and expected in error["message"], error
    assert error.get("ref") == frame.get("ref")
    env.fake.script(text="still here")
    await comm.send_json_to({"type": "message", "content": "hello"})
    assert types(await receive_until(comm, "session_sync"))[-2:] == ["stream_end", "session_sync"]
    await comm.disconnect()


# -- REST and the service: unknown, expired, decided, foreign, racing ---------------------------------------


def _open(session_id: str, user: Any, *, seconds: float = 600) -> Any:
    from approvals_app.services import approval_open

    return approval_open(session_id=session_id, user_id=user.pk, run_id="r", tool="terminal",
                         args={"command": "echo hi"}, reason="runs a program on the Navi server",
                         touches="`echo hi`", tainted_by=(), origin="live", is_subagent=False, wait_seconds=seconds)


@pytest.fixture
def owner_api(env) -> ApiClient:
    return ApiClient(token_for(env.user))


def _url(session_id: str, approval_id: Any) -> str:
    return f"/sessions/{session_id}/approvals/{approval_id}"


def test_rest_decides_once_and_refuses_a_second_decision(env, owner_api) -> None:
    approval = _open(env.session_id, env.user)
    first = owner_api.post(_url(env.session_id, approval.pk), {"decision": "deny", "reason": "no thanks"})
    assert first.status_code == 200, first.content
    assert first.json()["status"] == "denied" and first.json()["decision_reason"] == "no thanks"
    second = owner_api.post(_url(env.session_id, approval.pk), {"decision": "approve"})
    assert second.status_code == 409
    assert second.json()["detail"].startswith("This approval was already denied by alice at ")
    listed = owner_api.get(f"/sessions/{env.session_id}/approvals?status=denied").json()["items"]
    assert [a["id"] for a in listed] == [str(approval.pk)]
    assert owner_api.get(f"/sessions/{env.session_id}/approvals?status=weird").status_code == 400


def test_an_expired_approval_cannot_be_approved(env, owner_api) -> None:
    from approvals_app.models import Approval

    approval = _open(env.session_id, env.user)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = owner_api.post(_url(env.session_id, approval.pk), {"decision": "approve"})
    assert response.status_code == 409
    assert response.json()["detail"].startswith("This approval expired at ")
    assert "terminal was not run" in response.json()["detail"]
    assert Approval.objects.get(pk=approval.pk).status == "expired"


@pytest.mark.parametrize(("body", "field"), [({"decision": "yes"}, "decision"), ({}, "decision"),
                                             ({"decision": "approve", "scope": "always"}, "scope"),
                                             ({"decision": "deny", "reason": "x" * 2001}, "reason")])
def test_rest_bad_bodies(env, owner_api, body, field) -> None:
    approval = _open(env.session_id, env.user)
    response = owner_api.post(_url(env.session_id, approval.pk), body)
    assert response.status_code == 422 and field in response.json()["detail"]


def test_another_users_approval_is_404(env, owner_api) -> None:
    approval = _open(env.session_id, env.user)
    mallory = ApiClient(token_for(make_user("mallory")))
    response = mallory.post(_url(env.session_id, approval.pk), {"decision": "approve"})
    assert response.status_code == 404
    assert mallory.get(f"/sessions/{env.session_id}/approvals").status_code == 404
    assert owner_api.post(_url(env.session_id, "nope"), {"decision": "approve"}).status_code == 404


def test_two_tabs_deciding_at_once_exactly_one_counts(env) -> None:
    from approvals_app.models import Approval, AuditEntry

    approval = _open(env.session_id, env.user)
    results: list[int] = []
    barrier = threading.Barrier(2)

    def tab(decision: str) -> None:
        from django.db import connection

        client = ApiClient(token_for(env.user))
        barrier.wait()
        results.append(client.post(_url(env.session_id, approval.pk), {"decision": decision}).status_code)
        connection.close()

    threads = [threading.Thread(target=tab, args=(d,)) for d in ("approve", "deny")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(results) == [200, 409]
    final = Approval.objects.get(pk=approval.pk)
    assert final.status in ("approved", "denied")
    assert list(AuditEntry.objects.values_list("decision", flat=True)) == [final.status]


def test_signals_announce_created_and_resolved(env, owner_api) -> None:
    from approvals_app.signals import approval_created, approval_resolved

    seen: list[tuple[str, str]] = []

    def created(sender: Any, approval: Any, **_: Any) -> None:
        seen.append(("created", approval.status))

    def resolved(sender: Any, approval: Any, **_: Any) -> None:
        seen.append(("resolved", approval.status))

    approval_created.connect(created, dispatch_uid="t-created")
    approval_resolved.connect(resolved, dispatch_uid="t-resolved")
    try:
        approval = _open(env.session_id, env.user)
        owner_api.post(_url(env.session_id, approval.pk), {"decision": "approve", "scope": "session"})
    finally:
        approval_created.disconnect(dispatch_uid="t-created")
        approval_resolved.disconnect(dispatch_uid="t-resolved")
    assert seen == [("created", "pending"), ("resolved", "approved")]


# -- the audit log -------------------------------------------------------------------------------


def test_audit_own_entries_staff_see_all_and_filters(env, owner_api) -> None:
    from approvals_app.services import audit_record

    mallory = make_user("mallory")
    for user, tool, decision in ((env.user, "terminal", "allowed_rule"), (env.user, "http_request", "denied_unattended"),
                                 (mallory, "terminal", "denied_policy")):
        audit_record(user_id=user.pk, session_id=env.session_id, run_id="r", tool=tool, args={"a": 1},
                     decision=decision, ran=decision == "allowed_rule", success=True, result="x" * 5000)
    mine = ApiClient(token_for(mallory)).get("/audit").json()
    assert mine["total"] == 1 and mine["items"][0]["decision"] == "denied_policy"
    everyone = owner_api.get("/audit").json()  # alice is staff
    assert everyone["total"] == 3
    assert owner_api.get("/audit?tool=terminal&user=alice").json()["total"] == 1
    assert owner_api.get("/audit?decision=denied_unattended").json()["items"][0]["tool"] == "http_request"
    row = owner_api.get("/audit?decision=allowed_rule").json()["items"][0]
    assert row["ran"] is True and len(row["result_excerpt"]) < 1100 and row["result_excerpt"].endswith("more]")
    assert owner_api.get(f"/audit?session_id={env.session_id}").json()["total"] == 3
    assert owner_api.get("/audit?decision=nope").status_code == 400
    assert owner_api.get("/audit?session_id=zzz").status_code == 404
    future = (timezone.now() + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    assert owner_api.get(f"/audit?since={future}").json()["total"] == 0


def test_retention_purge_command(env, settings) -> None:
    from django.core.management import call_command

    from approvals_app.models import Approval, AuditEntry
    from approvals_app.services import audit_record

    old = audit_record(user_id=env.user.pk, session_id=env.session_id, run_id="r", tool="terminal", args={},
                       decision="denied_policy")
    AuditEntry.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=91))
    audit_record(user_id=env.user.pk, session_id=env.session_id, run_id="r", tool="terminal", args={},
                 decision="denied_policy")
    stale = _open(env.session_id, env.user)
    Approval.objects.filter(pk=stale.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    from io import StringIO

    out = StringIO()
    call_command("purge_audit", stdout=out)
    assert "Removed 1 audit entr(y/ies)" in out.getvalue() and "expired 1 stale pending" in out.getvalue()
    assert AuditEntry.objects.filter(pk=old.pk).count() == 0
    assert Approval.objects.get(pk=stale.pk).status == "expired"
    assert AuditEntry.objects.count() == 2  # the recent one and the expiry's own entry
    settings.AUDIT_RETENTION_DAYS = 0
    call_command("purge_audit", stdout=StringIO())
    assert AuditEntry.objects.count() == 0


def test_the_beat_schedule_purges_daily() -> None:
    from navi_site.celery import app

    assert app.conf.beat_schedule["approvals-purge"] == {"task": "approvals.purge", "schedule": 86400.0}
    from approvals_app.tasks import purge

    assert purge.name == "approvals.purge" and "approvals.purge" in app.tasks


def test_json_roundtrip_of_the_events() -> None:
    from agent.events import ApprovalRequired, ApprovalResolved, event_from_dict

    for event in (ApprovalRequired(approval_id="a", tool="t", args={"x": [1]}, reason="r", touches="w",
                                   tainted_by=["example.com"], expires_at="2026-01-01T00:00:00+00:00"),
                  ApprovalResolved(approval_id="a", decision="denied", reason="no", is_subagent=True)):
        assert event_from_dict(json.loads(json.dumps(event.to_dict()))) == event


def test_admin_pages_rules_per_profile_and_the_audit_log(env) -> None:
    from django.test import Client

    from approvals_app.models import ToolRule
    from approvals_app.services import audit_record

    admin = Client()
    admin.force_login(env.user)
    page = admin.get("/admin/agent/agentprofile/tester/change/")
    assert page.status_code == 200 and b"Tool approval rules (allow / ask / deny" in page.content
    created = admin.post("/admin/approvals_app/toolrule/add/", {
        "profile": "tester", "tool": "terminal", "action": "", "decision": "allow",
        "allow_patterns": '["df*", "uptime"]', "notes": ""})
    assert created.status_code == 302, created.content.decode()[:2000]
    assert ToolRule.objects.get(tool="terminal").allow_patterns == ["df*", "uptime"]
    bad = admin.post("/admin/approvals_app/toolrule/add/", {
        "profile": "tester", "tool": "ssh_exec", "action": "", "decision": "allow", "allow_patterns": '"df*"'})
    assert bad.status_code == 200 and b"Must be a JSON list of non-empty patterns" in bad.content
    audit_record(user_id=env.user.pk, session_id=env.session_id, run_id="r", tool="terminal", args={},
                 decision="denied_policy")
    listing = admin.get("/admin/approvals_app/auditentry/?decision__exact=denied_policy")
    assert listing.status_code == 200 and b"denied by an admin rule" in listing.content


def test_recall_rules_bad_input_and_patch(env, owner_api) -> None:
    from recall_app.services import recall_schedule
    from sessions_app.models import Session

    session = Session.objects.get(pk=env.session_id)
    with pytest.raises(Exception, match="on_approval='later' is not valid"):
        recall_schedule(session=session, call_type="immediate", additional_context_message="x", on_approval="later")
    recall_schedule(session=session, call_type="once", when="2h", additional_context_message="Check the log.")
    url = f"/sessions/{env.session_id}/recall"
    assert owner_api.get(url).json()["on_approval"] == "deny"
    for body, message in (({"max_seconds": 5}, "max_seconds=5 is out of range"),
                          ({"on_approval": "sometimes"}, "on_approval='sometimes' is not valid"),
                          ({"allowed_tools": ["", "x"]}, "allowed_tools must be a list of tool names")):
        response = owner_api.patch(url, body)
        assert response.status_code == 400 and message in response.json()["detail"], response.json()
    changed = owner_api.patch(url, {"on_approval": "park", "allowed_tools": ["terminal", "todo"], "max_seconds": 60})
    assert changed.status_code == 200
    assert (changed.json()["on_approval"], changed.json()["allowed_tools"], changed.json()["max_seconds"]) == (
        "park", ["terminal", "todo"], 60)
    assert owner_api.get(url).json()["waiting_approval"] is None


async def test_a_run_that_dies_mid_wait_leaves_no_approval_pending(env) -> None:
    from approvals_app.models import Approval
    from sessions_app import runs

    kept = await sync_to_async(_open)(env.session_id, env.user)  # another run's: untouched

    async def dying_turn(session_id: str, text: str, **kw: Any) -> Any:
        from approvals_app.services import approval_open

        await sync_to_async(approval_open)(
            session_id=session_id, user_id=env.user.pk, run_id=kw["run_id"], tool="terminal", args={}, reason="r",
            touches="", tainted_by=(), origin="live", is_subagent=False, wait_seconds=600)
        raise RuntimeError("the loop crashed while a call waited")
        yield  # pragma: no cover - an async generator

    runs.set_run_registry(runs.RunRegistry(store=runs.LocalStore(), turn=dying_turn))
    result = await runs.get_run_registry().run_turn(runs.TurnRequest(session_id=env.session_id, text="x",
                                                                      user_id=env.user.pk))
    assert result.outcome.startswith("error:")
    statuses = await sync_to_async(lambda: dict(Approval.objects.values_list("run_id", "status")))()
    assert statuses.pop("r") == "pending" and list(statuses.values()) == ["cancelled"]
    assert (await sync_to_async(Approval.objects.get)(pk=kept.pk)).status == "pending"
