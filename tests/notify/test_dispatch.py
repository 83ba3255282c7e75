"""The dispatcher: per-user choices per kind and channel, defaults, deduplication, the settings API
(and its bad input), and the events that notify (recall finished/failed, a long unseen turn)."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from notify_app import kinds
from notify_app.dispatch import first_lines, notify
from notify_app.models import Notification, Preference

pytestmark = pytest.mark.django_db


@pytest.fixture
def reachable(user: Any, settings: Any) -> Any:
    """alice has an e-mail address and the server SMTP settings: the e-mail channel reaches her."""
    settings.EMAIL_HOST = "127.0.0.1"
    user.email = "alice@example.org"
    user.save()
    return user


def _channels(notification: Notification | None) -> set[str]:
    assert notification is not None
    return {d.channel for d in notification.deliveries.all()}


def test_defaults_decide_until_the_user_chooses(reachable):
    assert _channels(notify(user_id=reachable.pk, kind=kinds.RECALL_FAILED, title="t")) == {kinds.EMAIL}
    assert _channels(notify(user_id=reachable.pk, kind=kinds.RECALL_FINISHED, title="t")) == set()  # e-mail off
    Preference.objects.create(user=reachable, kind=kinds.RECALL_FINISHED, channel=kinds.EMAIL, enabled=True)
    Preference.objects.create(user=reachable, kind=kinds.RECALL_FAILED, channel=kinds.EMAIL, enabled=False)
    assert _channels(notify(user_id=reachable.pk, kind=kinds.RECALL_FINISHED, title="t")) == {kinds.EMAIL}
    assert _channels(notify(user_id=reachable.pk, kind=kinds.RECALL_FAILED, title="t")) == set()


def test_choices_are_per_user(reachable, other_user):
    Preference.objects.create(user=other_user, kind=kinds.RECALL_FAILED, channel=kinds.EMAIL, enabled=False)
    assert _channels(notify(user_id=reachable.pk, kind=kinds.RECALL_FAILED, title="t")) == {kinds.EMAIL}


def test_the_same_event_is_notified_once(reachable):
    assert notify(user_id=reachable.pk, kind=kinds.RECALL_FAILED, title="t", dedupe_key="recall-run:7")
    assert notify(user_id=reachable.pk, kind=kinds.RECALL_FAILED, title="t", dedupe_key="recall-run:7") is None
    assert Notification.objects.filter(dedupe_key="recall-run:7").count() == 1


def test_unknown_kind_and_inactive_user(reachable):
    with pytest.raises(ValueError, match="unknown notification kind 'nope'"):
        notify(user_id=reachable.pk, kind="nope", title="t")
    reachable.is_active = False
    reachable.save()
    assert notify(user_id=reachable.pk, kind=kinds.RECALL_FAILED, title="t") is None


def test_first_lines():
    assert first_lines("\n\nOne\n\n two \nthree\nfour\nfive") == "One\n two\nthree\nfour"
    assert first_lines("x" * 400) == "x" * 299 + "…"
    assert first_lines("") == ""


# -- the settings API ------------------------------------------------------------------------


def test_settings_show_defaults_and_what_each_channel_needs(api, settings):
    settings.EMAIL_HOST = ""
    out = api.get("/notifications/settings").json()
    assert [k["name"] for k in out["kinds"]] == [kinds.RECALL_FINISHED, kinds.RECALL_FAILED, kinds.RECALL_APPROVAL,
                                                 kinds.APPROVAL_WAITING, kinds.LONG_TURN]
    assert out["choices"][kinds.RECALL_FAILED] == {kinds.WEBPUSH: True, kinds.EMAIL: True, kinds.TELEGRAM: True}
    assert out["choices"][kinds.RECALL_FINISHED][kinds.EMAIL] is False
    email = next(c for c in out["channels"] if c["name"] == kinds.EMAIL)
    assert email == {"name": "email", "label": "E-mail", "available": False,
                     "detail": "The server has no SMTP settings: the administrator sets EMAIL_HOST."}


def test_settings_are_saved(api, user, settings):
    settings.EMAIL_HOST = "127.0.0.1"
    resp = api.put("/notifications/settings", {"choices": {"long_turn": {"email": True, "webpush": False}},
                                               "email": " alice@example.org "})
    assert resp.status_code == 200, resp.content
    out = resp.json()
    assert out["choices"]["long_turn"] == {"webpush": False, "email": True, "telegram": True}
    assert out["email"] == "alice@example.org"
    assert next(c for c in out["channels"] if c["name"] == "email")["detail"] == "To alice@example.org"
    assert api.get("/notifications/settings").json()["choices"]["long_turn"]["email"] is True


@pytest.mark.parametrize(("body", "message"), [
    ({"choices": {"long_turn": {"email": True}, "bogus": {"email": True}}}, "Unknown notification kind 'bogus'"),
    ({"choices": {"long_turn": {"pigeon": True}}}, "Unknown channel 'pigeon' for long_turn"),
    ({"choices": {"test": {"email": False}}}, "Unknown notification kind 'test'"),
    ({"email": "not an address"}, "'not an address' is not an e-mail address"),
    ({"choices": {"long_turn": {"email": "maybe"}}}, "Invalid request: choices.long_turn.email"),
])
def test_bad_settings_are_refused_and_nothing_changes(api, user, body, message):
    user.email = "kept@example.org"
    user.save()
    resp = api.put("/notifications/settings", body)
    assert resp.status_code in (400, 422)
    assert message in resp.json()["detail"]
    assert not Preference.objects.filter(user=user).exists()
    user.refresh_from_db()
    assert user.email == "kept@example.org"


def test_settings_need_a_login(client):
    assert client.get("/notifications/settings").status_code == 401


def test_a_test_notification_goes_to_every_reachable_channel(api, user, settings):
    settings.EMAIL_HOST = "127.0.0.1"
    user.email = "alice@example.org"
    user.save()
    Preference.objects.create(user=user, kind=kinds.RECALL_FAILED, channel=kinds.EMAIL, enabled=False)
    resp = api.post("/notifications/test")
    assert resp.status_code == 202
    assert resp.json()["channels"] == ["email"]
    listed = api.get("/notifications").json()["items"]
    assert listed[0]["title"] == "Test notification from Navi"
    assert listed[0]["deliveries"] == [{"channel": "email", "status": "pending", "attempts": 0, "error": ""}]


# -- events that notify ----------------------------------------------------------------------


def _recall_run(user: Any, *, report: str) -> tuple[Any, Any]:
    """A recall claimed like the worker does, with the run's messages written."""
    from recall_app.firing import claim_recall
    from recall_app.models import Recall
    from sessions_app.models import Message, Session
    from sessions_app.services import session_create

    session = session_create(owner=user, title="Build watch")
    recall = Recall.objects.create(session=session, call_type="once", trigger_at=timezone.now() - timedelta(seconds=1),
                                   additional_context_message="Read /tmp/build.log with filesystem.")
    claim = claim_recall(str(recall.pk)).claim
    assert claim is not None
    Message.objects.create(session=session, seq=1, role="user", content="[Scheduled recall]", is_recall=True)
    Message.objects.create(session=session, seq=2, role="assistant", content=report)
    Session.objects.filter(pk=session.pk).update(next_seq=3)
    return session, claim


def test_a_finished_recall_notifies_with_its_first_lines(user, django_capture_on_commit_callbacks):
    from recall_app.firing import finish_claim

    session, claim = _recall_run(user, report="The build is green.\n\nAll 412 tests passed.\nDetails follow.\n"
                                               "More.\nAnd more.")
    with django_capture_on_commit_callbacks(execute=True):
        finish_claim(recall_id=claim.recall_id, token=claim.token, run_id=claim.run_id, outcome="success")
    [n] = Notification.objects.filter(user=user)
    assert (n.kind, n.title, n.session_id) == (kinds.RECALL_FINISHED, "Recall finished · Build watch", session.id)
    assert n.body == "The build is green.\nAll 412 tests passed.\nDetails follow.\nMore."
    assert n.url == f"/#{session.id}"
    assert n.dedupe_key == f"recall-run:{claim.run_id}"


def test_a_failed_recall_notifies_with_the_error(user, django_capture_on_commit_callbacks):
    from recall_app.firing import finish_claim

    _, claim = _recall_run(user, report="")
    with django_capture_on_commit_callbacks(execute=True):
        finish_claim(recall_id=claim.recall_id, token=claim.token, run_id=claim.run_id, outcome="error",
                     error="model X is not on the Ollama server")
    [n] = Notification.objects.filter(user=user)
    assert (n.kind, n.title, n.body) == (kinds.RECALL_FAILED, "Recall failed · Build watch",
                                         "model X is not on the Ollama server")


def test_a_stopped_recall_does_not_notify(user, django_capture_on_commit_callbacks):
    from recall_app.firing import finish_claim

    _, claim = _recall_run(user, report="partial")
    with django_capture_on_commit_callbacks(execute=True):
        finish_claim(recall_id=claim.recall_id, token=claim.token, run_id=claim.run_id, outcome="stopped")
    assert not Notification.objects.exists()


def test_a_failing_notification_never_breaks_the_recall(user, monkeypatch, django_capture_on_commit_callbacks):
    from notify_app import sources
    from recall_app.firing import finish_claim
    from recall_app.models import Recall

    def broken(**_: Any) -> None:
        raise RuntimeError("the notification store is down")

    monkeypatch.setattr(sources, "notify", broken)
    _, claim = _recall_run(user, report="done")
    with django_capture_on_commit_callbacks(execute=True):
        action = finish_claim(recall_id=claim.recall_id, token=claim.token, run_id=claim.run_id, outcome="success")
    assert action == "fired"
    assert Recall.objects.get(pk=claim.recall_id).status == "fired"


def _ended(session: Any, *, seconds: float, outcome: str = "success", is_recall: bool = False) -> Any:
    from sessions_app.hooks import TurnEnded

    return TurnEnded(session_id=str(session.id), user_id=session.owner_id, is_recall=is_recall, outcome=outcome,
                     content="Here is the summary you asked for.\nSecond line.", seconds=seconds)


def test_a_long_turn_nobody_watched_notifies(user, settings):
    from sessions_app.hooks import run_turn_finished_hooks
    from sessions_app.services import session_create

    settings.NOTIFY_LONG_TURN_SECONDS = 60
    session = session_create(owner=user, title="Inbox")
    run_turn_finished_hooks(str(session.id), _ended(session, seconds=59))
    run_turn_finished_hooks(str(session.id), _ended(session, seconds=61, outcome="stopped"))
    run_turn_finished_hooks(str(session.id), _ended(session, seconds=61, is_recall=True))
    assert not Notification.objects.exists()
    run_turn_finished_hooks(str(session.id), _ended(session, seconds=61))
    [n] = Notification.objects.all()
    assert (n.kind, n.title, n.body) == (kinds.LONG_TURN, "Navi finished · Inbox",
                                         "Here is the summary you asked for.\nSecond line.")
    run_turn_finished_hooks(str(session.id), _ended(session, seconds=61, outcome="error: the model went away"))
    assert Notification.objects.first().title == "Navi's turn failed · Inbox"


@pytest.mark.django_db(transaction=True)
async def test_a_long_turn_shown_in_a_visible_tab_does_not_notify(user, settings):
    from asgiref.sync import sync_to_async

    from sessions_app import presence
    from sessions_app.hooks import run_turn_finished_hooks
    from sessions_app.services import session_create

    settings.NOTIFY_LONG_TURN_SECONDS = 1
    session = await sync_to_async(session_create)(owner=user, title="Inbox")
    sid = str(session.id)
    await presence.aset(sid, "tab-1", visible=True)
    await presence.aset(sid, "tab-2", visible=False)
    try:
        await sync_to_async(run_turn_finished_hooks)(sid, _ended(session, seconds=5))
        assert not await Notification.objects.aexists()
        await presence.aset(sid, "tab-1", visible=False)  # hidden now: a notification is due
        await sync_to_async(run_turn_finished_hooks)(sid, _ended(session, seconds=5))
        assert await Notification.objects.acount() == 1
    finally:
        await presence.aleave(sid, "tab-1")
        await presence.aleave(sid, "tab-2")
    assert presence.watching(sid) == presence.Watching(clients=0, visible=0)
