"""Approvals reach the user (issue 25 items 1): a parked recall run always notifies, a live turn's
approval only when no visible client shows its session; push and e-mail carry the tool, the reason
and a link that opens the session, whose replay shows the card."""
from __future__ import annotations

from typing import Any

import pytest

from notify_app import kinds, vapid
from notify_app.delivery import delivery_attempt
from notify_app.models import Notification

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reachable(user: Any, settings: Any, tmp_path: Any) -> Any:
    settings.DATA_DIR = tmp_path / "data"
    settings.NAVI_PUBLIC_URL = "https://navi.example"
    user.email = "alice@example.org"
    user.save()
    return user


def _open(session: Any, *, origin: str, tool: str = "terminal", tainted_by: tuple[str, ...] = ()) -> Any:
    from approvals_app.services import approval_open

    return approval_open(session_id=str(session.id), user_id=session.owner_id, run_id="run1", tool=tool,
                         args={"command": "rm -rf build"}, reason="terminal runs commands on the machine",
                         touches="rm -rf build", tainted_by=tainted_by, origin=origin, is_subagent=False,
                         wait_seconds=600)


def _session(user: Any, title: str = "Build watch") -> Any:
    from sessions_app.services import session_create

    return session_create(owner=user, title=title)


def test_a_parked_recall_always_notifies_with_the_card_in_plain_words(reachable):
    from sessions_app import presence

    session = _session(reachable)
    presence.backend().set(str(session.id), "tab-1", True)  # even with a tab on it: nobody drives a recall
    try:
        approval = _open(session, origin="recall", tainted_by=("example.com",))
    finally:
        presence.backend().leave(str(session.id), "tab-1")
    [note] = Notification.objects.all()
    assert (note.kind, note.title) == (kinds.RECALL_APPROVAL,
                                       "A recall waits for your approval · terminal · Build watch")
    assert note.body.splitlines()[:4] == [
        "Navi wants to run terminal.", "Why it asks: terminal runs commands on the machine.", "Touches: rm -rf build",
        "This turn read example.com: content from there may be steering this request."]
    assert note.url == f"/#{session.id}" and note.data == {"approval_id": str(approval.pk), "tool": "terminal"}
    _open(session, origin="recall")  # each approval is its own event
    assert Notification.objects.count() == 2


async def test_a_live_approval_notifies_only_when_no_visible_client_shows_it(reachable):
    from asgiref.sync import sync_to_async

    from sessions_app import presence

    session = await sync_to_async(_session)(reachable)
    sid = str(session.id)
    await presence.aset(sid, "tab-1", visible=False)  # a tab in the background
    try:
        await sync_to_async(_open)(session, origin="live")
        note = await Notification.objects.aget()
        assert (note.kind, note.title) == (kinds.APPROVAL_WAITING, "Navi waits for your approval · terminal · "
                                                                   "Build watch")
        await presence.aset(sid, "tab-1", visible=True)
        await sync_to_async(_open)(session, origin="live")
        assert await Notification.objects.acount() == 1  # someone looks at this card
    finally:
        await presence.aleave(sid, "tab-1")
    assert await Notification.objects.acount() == 2  # ...until the tab closed with it still waiting
    await sync_to_async(_open)(session, origin="live")  # no client at all
    assert await Notification.objects.acount() == 3


async def test_an_approval_seen_when_it_opened_notifies_once_its_tab_is_hidden_or_closed(reachable):
    from asgiref.sync import sync_to_async

    from sessions_app import presence

    session = await sync_to_async(_session)(reachable)
    sid = str(session.id)
    await presence.aset(sid, "tab-1", visible=True)
    await presence.aset(sid, "tab-2", visible=True)
    try:
        approval = await sync_to_async(_open)(session, origin="live")
        await presence.aset(sid, "tab-1", visible=False)
        assert not await Notification.objects.aexists()  # tab-2 still shows the card
        await presence.aleave(sid, "tab-2")  # the last visible tab closed
        note = await Notification.objects.aget()
        assert (note.kind, note.data["approval_id"]) == (kinds.APPROVAL_WAITING, str(approval.pk))
        await presence.aleave(sid, "tab-1")
        assert await Notification.objects.acount() == 1  # the same approval is notified once
    finally:
        await presence.aleave(sid, "tab-1")
        await presence.aleave(sid, "tab-2")


def test_the_user_chooses_the_channels_of_approval_notifications(reachable, api, settings):
    settings.EMAIL_HOST = "127.0.0.1"
    out = api.get("/notifications/settings").json()
    assert {"recall_approval", "approval_waiting"} <= {k["name"] for k in out["kinds"]}
    assert out["choices"]["recall_approval"] == {"webpush": True, "email": True, "telegram": True}
    assert out["choices"]["approval_waiting"] == {"webpush": True, "email": False, "telegram": True}
    resp = api.put("/notifications/settings", {"choices": {"recall_approval": {"email": False}}})
    assert resp.status_code == 200
    _open(_session(reachable), origin="recall")
    assert not Notification.objects.get().deliveries.filter(channel="email").exists()


def test_email_and_push_of_an_approval_open_its_session(reachable, settings, smtp_server, push_service, api):
    settings.EMAIL_HOST = settings.EMAIL_HOST or "127.0.0.1"
    push_service.vapid_public_key = vapid.public_key()
    sub = push_service.subscription("laptop")
    assert api.post("/notifications/push/subscriptions", {**sub, "user_agent": "test"}).status_code == 201
    session = _session(reachable, "Deploys")
    _open(session, origin="recall")
    note = Notification.objects.get()
    for delivery in note.deliveries.filter(channel__in=["email", "webpush"]):
        assert delivery_attempt(delivery.pk, attempt=0).status == "sent"
    [mail] = smtp_server.received
    assert " ".join(mail.subject.split()) == "[Navi] A recall waits for your approval · terminal · Deploys"  # unfolded
    assert "Navi wants to run terminal." in mail.text and f"https://navi.example/#{session.id}" in mail.text
    [push] = push_service.received
    assert (push.payload["url"], push.payload["kind"]) == (f"/#{session.id}", "recall_approval")
    assert push.payload["body"].startswith("Navi wants to run terminal.")
