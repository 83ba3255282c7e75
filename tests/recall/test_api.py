"""REST: GET/DELETE /sessions/{id}/recall, POST .../recall/skip, GET .../recalls; session flags/filter."""
from __future__ import annotations

import uuid

import pytest

from recall_app import firing
from recall_app.models import Recall
from tests.recall.conftest import make_recall

pytestmark = pytest.mark.django_db


def test_get_pending_recall_in_the_documented_shape(api, session) -> None:
    recall = make_recall(session, due_in=600, internal_comment="Check build logs")
    body = api.get(f"/sessions/{session.id}/recall").json()
    assert body == {
        "id": str(recall.id), "call_type": "once", "trigger_at": recall.trigger_at.isoformat(),
        "interval_seconds": None, "internal_comment": "Check build logs",
        "additional_context_message": "Read /tmp/build.log with filesystem.", "status": "pending", "firing": False,
        # What its unattended runs may do (issue 20), and the approval a parked run waits for.
        "allowed_tools": [], "max_iterations": None, "max_seconds": None, "on_approval": "deny",
        "waiting_approval": None,
    }


def test_get_without_pending_recall(api, session) -> None:
    make_recall(session, status="fired")
    response = api.get(f"/sessions/{session.id}/recall")
    assert response.status_code == 200 and response.json() == {"recall": None}


def test_a_firing_recurring_recall_is_still_the_pending_one(api, session) -> None:
    recall = make_recall(session, call_type="recurring")
    firing.claim_recall(str(recall.id))
    body = api.get(f"/sessions/{session.id}/recall").json()
    assert body["id"] == str(recall.id) and body["status"] == "pending" and body["firing"] is True


def test_delete_cancels(api, session, sent, django_capture_on_commit_callbacks) -> None:
    recall = make_recall(session, due_in=600)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.delete(f"/sessions/{session.id}/recall")
    assert response.status_code == 200 and response.json() == {"ok": True}
    assert Recall.objects.get(pk=recall.id).status == "cancelled"
    assert sent.recall_updates()[-1]["action"] == "cancelled"
    assert api.delete(f"/sessions/{session.id}/recall").json() == {"ok": True}  # nothing left: still ok


def test_skip(api, session) -> None:
    recall = make_recall(session, call_type="recurring", due_in=600, interval=300)
    assert api.post(f"/sessions/{session.id}/recall/skip").json() == {"ok": True}
    assert (Recall.objects.get(pk=recall.id).trigger_at - recall.trigger_at).total_seconds() == 300


def test_skip_without_recurring_recall_is_400(api, session) -> None:
    make_recall(session, due_in=600)
    response = api.post(f"/sessions/{session.id}/recall/skip")
    assert response.status_code == 400 and "no recurring pending recall" in response.json()["detail"]


def test_history_lists_recalls_with_runs(api, session, fake_run) -> None:
    old = make_recall(session, status="cancelled")
    fired = make_recall(session)
    firing.fire_recall(str(fired.id))
    body = api.get(f"/sessions/{session.id}/recalls").json()
    assert body["session_id"] == str(session.id)
    by_id = {r["id"]: r for r in body["recalls"]}
    assert set(by_id) == {str(old.id), str(fired.id)}
    assert by_id[str(fired.id)]["status"] == "fired" and by_id[str(fired.id)]["fire_count"] == 1
    run, = by_id[str(fired.id)]["runs"]
    assert run["outcome"] == "success" and run["finished_at"]
    assert by_id[str(old.id)]["runs"] == []


@pytest.mark.parametrize(("method", "suffix"), [("get", "recall"), ("delete", "recall"), ("post", "recall/skip"),
                                                ("get", "recalls")])
def test_other_users_and_unknown_sessions_are_404(api, other_api, session, method: str, suffix: str) -> None:
    recall = make_recall(session, call_type="recurring", due_in=600)
    for sid in (session.id, uuid.uuid4(), "not-a-uuid"):
        response = getattr(other_api, method)(f"/sessions/{sid}/{suffix}")
        assert response.status_code == 404, (sid, response.content)
    fresh = Recall.objects.get(pk=recall.id)
    assert (fresh.status, fresh.trigger_at) == ("pending", recall.trigger_at)


def test_other_user_cannot_cancel(other_api, session) -> None:
    recall = make_recall(session, due_in=600)
    assert other_api.delete(f"/sessions/{session.id}/recall").status_code == 404
    assert Recall.objects.get(pk=recall.id).status == "pending"


def test_unauthenticated_is_401(session) -> None:
    from django.test import Client

    assert Client().get(f"/sessions/{session.id}/recall").status_code == 401


def test_session_list_flag_and_filter(api, user) -> None:
    from sessions_app.services import session_create

    with_recall, without = session_create(owner=user), session_create(owner=user)
    make_recall(with_recall, due_in=600)
    make_recall(without, status="fired")
    items = api.get("/sessions").json()["items"]
    flags = {i["id"]: i["has_pending_recall"] for i in items}
    assert flags == {str(with_recall.id): True, str(without.id): False}
    only = api.get("/sessions?has_pending_recall=true").json()
    assert [i["id"] for i in only["items"]] == [str(with_recall.id)] and only["total"] == 1
    assert api.get(f"/sessions/{with_recall.id}").json()["has_pending_recall"] is True


def test_admin_pages_render(user, session, fake_run) -> None:
    from django.test import Client

    recall = make_recall(session)
    firing.fire_recall(str(recall.id))
    client = Client()
    client.force_login(user)
    for url in ("/admin/recall_app/recall/", "/admin/recall_app/recall/?status__exact=fired&q=build",
                f"/admin/recall_app/recall/{recall.id}/change/", "/admin/recall_app/recallrun/"):
        assert client.get(url).status_code == 200, url
