"""End to end over real transports: recall_update on the session's channel-layer group and
WebSocket, and a firing through the real run registry with a scripted turn."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from agent.events import StreamEnd
from recall_app import firing, services
from recall_app.models import Recall
from sessions_app.bus import group_name
from sessions_app.services import session_create
from tests.recall.conftest import make_recall
from tests.support.users import make_user, token_for

GOOD = "Read /tmp/build.log with filesystem. If errors, read last 50 lines and report."


async def _receive_until(receive: Any, wanted: str, timeout: float = 3.0) -> dict[str, Any]:
    async def loop() -> dict[str, Any]:
        while True:
            event = await receive()
            if event.get("type") == wanted:
                return event

    return await asyncio.wait_for(loop(), timeout)


@pytest.mark.django_db(transaction=True)
async def test_recall_update_reaches_the_sessions_group() -> None:
    user = await sync_to_async(make_user)("alice")
    session = await sync_to_async(session_create)(owner=user)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group_name(session.id), channel)

    async def receive() -> dict[str, Any]:
        message = await layer.receive(channel)
        assert message["type"] == "session.event"
        return message["event"]

    recall = await sync_to_async(services.recall_schedule)(
        session=session, call_type="recurring", when="10m", interval_seconds=600, additional_context_message=GOOD)
    event = await _receive_until(receive, "recall_update")
    assert event == {"type": "recall_update", "session_id": str(session.id), "recall_id": str(recall.id),
                     "call_type": "recurring", "trigger_at": recall.trigger_at.isoformat(), "status": "pending",
                     "action": "scheduled"}
    await sync_to_async(services.recall_skip)(session=session)
    assert (await _receive_until(receive, "recall_update"))["action"] == "rescheduled"
    await sync_to_async(services.recall_cancel)(session=session)
    event = await _receive_until(receive, "recall_update")
    assert (event["action"], event["status"]) == ("cancelled", "cancelled")
    await layer.group_discard(group_name(session.id), channel)


@pytest.mark.django_db(transaction=True)
async def test_a_websocket_client_sees_recall_updates() -> None:
    from channels.testing import WebsocketCommunicator

    from navi_site.asgi import application

    user = await sync_to_async(make_user)("alice")
    session = await sync_to_async(session_create)(owner=user)
    token = await sync_to_async(token_for)(user)
    comm = WebsocketCommunicator(application, f"/ws/sessions/{session.id}?token={token}",
                                 headers=[(b"host", b"testserver")])
    connected, _ = await comm.connect()
    assert connected
    await sync_to_async(services.recall_schedule)(session=session, call_type="once", when="1h",
                                                  additional_context_message=GOOD)
    event = await _receive_until(lambda: comm.receive_json_from(timeout=3), "recall_update")
    assert event["action"] == "scheduled" and event["session_id"] == str(session.id)
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)  # the registry's database_sync_to_async closes connections
def test_firing_through_the_run_registry(session, user, sent) -> None:
    """The seam against the real registry: the scripted turn gets the recall text, is_recall=True
    and the owner; StreamEnd makes it a success."""
    runs = pytest.importorskip("sessions_app.runs")
    calls: list[dict[str, Any]] = []

    async def turn(session_id: str, text: str, **kw: Any) -> Any:
        calls.append({"session_id": session_id, "text": text, **kw})
        yield StreamEnd(content="Build log is clean.")

    runs.set_run_registry(runs.RunRegistry(store=runs.LocalStore(), turn=turn))
    try:
        recall = make_recall(session)
        assert firing.fire_recall(str(recall.id)) == "success"
    finally:
        runs.set_run_registry(None)
    call, = calls
    assert call["session_id"] == str(session.id) and call["is_recall"] is True
    assert call["user_id"] == user.pk and call["user_role"] == "staff"
    assert "Read /tmp/build.log with filesystem." in call["text"]
    assert Recall.objects.get(pk=recall.id).status == "fired"
    assert sent.recall_updates()[-1]["action"] == "fired"


@pytest.mark.django_db
def test_the_registry_reports_busy(session, monkeypatch) -> None:
    runs = pytest.importorskip("sessions_app.runs")
    monkeypatch.setattr(runs, "is_busy", lambda session_id: session_id == str(session.id))
    recall = make_recall(session)
    assert firing.fire_recall(str(recall.id)) == "deferred"


@pytest.mark.django_db(transaction=True)
def test_a_run_outside_the_server_loop_runs_its_end_of_turn_hooks(session, user) -> None:
    """A worker without a server loop (scale-out Celery, a plain thread) runs the turn on the loop of
    ``async_to_sync`` / ``asyncio.run``. The registry's end-of-turn work (the turn-ended hooks: here
    approvals_app cancelling an approval the run left pending) comes after the run's result is set;
    it must still run before that loop goes away (it used to fail: "CurrentThreadExecutor already quit")."""
    import threading

    from approvals_app.models import Approval
    from approvals_app.services import approval_open

    runs = pytest.importorskip("sessions_app.runs")

    async def turn(session_id: str, text: str, **kw: Any) -> Any:
        # A call waited for approval and the run ended without settling it (it died mid-wait).
        await sync_to_async(approval_open, thread_sensitive=False)(
            session_id=session_id, user_id=kw["user_id"], run_id=kw["run_id"], tool="terminal",
            args={"command": "rm -rf build"}, reason="terminal runs commands", touches="build", tainted_by=(),
            origin="recall", is_subagent=False, wait_seconds=600)
        yield StreamEnd(content="Done.")

    runs.set_run_registry(runs.RunRegistry(turn=turn))  # the tier's store: Redis in scale-out
    try:
        recall = make_recall(session)
        assert firing.fire_recall(str(recall.id)) == "success"  # Celery's path: async_to_sync, no server loop
        approval = Approval.objects.get(session=session)
        assert (approval.status, approval.decision_reason) == ("cancelled", "the turn ended")

        outcome: list[str] = []
        thread = threading.Thread(target=lambda: outcome.append(runs.run_recall_turn_blocking(
            str(session.id), user_id=user.pk, content="Again.")))  # a plain thread: asyncio.run
        thread.start()
        thread.join(30)
        assert outcome == ["success"]
        pending = Approval.objects.filter(session=session, status="pending")
        assert list(pending) == [], "the second run's orphaned approval stayed pending"
    finally:
        runs.set_run_registry(None)
