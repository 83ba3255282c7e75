"""REST /sessions: CRUD, ordering, pagination, ownership."""
from __future__ import annotations

import uuid

import pytest

from sessions_app import services
from sessions_app.models import Message, Session

pytestmark = pytest.mark.django_db


def test_create_returns_documented_fields(api, user) -> None:
    resp = api.post("/sessions", {"profile_id": "server_admin"})
    assert resp.status_code == 201
    body = resp.json()
    assert set(body) == {"session_id", "profile_id", "created_at"}
    assert body["profile_id"] == "server_admin"
    assert Session.objects.get(pk=body["session_id"]).owner == user


def test_create_defaults_to_secretary_and_rejects_unknown_profile(api) -> None:
    assert api.post("/sessions").json()["profile_id"] == "secretary"
    resp = api.post("/sessions", {"profile_id": "pirate"})
    assert resp.status_code == 400
    assert "Unknown profile 'pirate'" in resp.json()["detail"]
    assert "secretary" in resp.json()["detail"]


def test_list_is_pinned_first_then_last_active_and_paginated(api, user) -> None:
    ids = [api.post("/sessions", {"title": f"s{i}"}).json()["session_id"] for i in range(5)]
    services.message_append(session_id=ids[1], role="user", content="hi")  # most recent activity
    api.patch(f"/sessions/{ids[3]}/pin", {"pinned": True})
    items = api.get("/sessions").json()["items"]
    assert [i["id"] for i in items][:2] == [ids[3], ids[1]]
    page = api.get("/sessions?limit=2&offset=2").json()
    assert page["total"] == 5 and len(page["items"]) == 2
    assert api.get("/sessions?q=s4").json()["items"][0]["title"] == "s4"


def test_list_items_are_the_documented_session_shape(api, user) -> None:
    from django.core.serializers.json import DjangoJSONEncoder

    from sessions_app.schemas import SessionOut, SessionPage

    sid = api.post("/sessions", {"title": "ünïcode ✓", "profile_id": "server_admin"}).json()["session_id"]
    api.patch(f"/sessions/{sid}/pin", {"pinned": True})
    resp = api.get("/sessions")
    assert resp["Content-Type"] == "application/json; charset=utf-8"
    body = resp.json()
    SessionPage.model_validate(body)  # the OpenAPI schema the list promises
    (item,) = body["items"]
    assert list(item) == list(SessionOut.model_fields)  # every field, in the documented order
    session = Session.objects.select_related("profile").get(pk=sid)
    encode = DjangoJSONEncoder().default
    assert item == {"id": sid, "profile_id": "server_admin", "profile_name": session.profile.name,
                    "title": "ünïcode ✓", "pinned": True, "created_at": encode(session.created_at),
                    "last_active": encode(session.last_active), "context_token_count": 0,
                    "has_pending_recall": False, "busy": False}
    assert api.get(f"/sessions/{sid}").json()["created_at"] == item["created_at"]  # as the other answers


def test_get_returns_display_buffer_paginated(api) -> None:
    sid = api.post("/sessions").json()["session_id"]
    for i in range(5):
        services.message_append(session_id=sid, role="user", content=f"m{i}")
    services.message_append(session_id=sid, role="user", content="ctx only", buffer=Message.Buffer.CONTEXT)
    body = api.get(f"/sessions/{sid}?limit=3").json()
    assert [m["content"] for m in body["messages"]] == ["m2", "m3", "m4"]
    assert body["has_more"] is True
    older = api.get(f"/sessions/{sid}?limit=3&before={body['messages'][0]['seq']}").json()
    assert [m["content"] for m in older["messages"]] == ["m0", "m1"] and older["has_more"] is False
    ctx = api.get(f"/sessions/{sid}/context").json()
    assert [m["content"] for m in ctx["messages"]][-1] == "ctx only"


def test_rename_pin_delete(api, settings) -> None:
    sid = api.post("/sessions").json()["session_id"]
    assert api.patch(f"/sessions/{sid}", {"title": "Taxes 2026"}).json()["title"] == "Taxes 2026"
    assert api.patch(f"/sessions/{sid}/pin", {"pinned": True}).json()["pinned"] is True
    files = services.session_files_dir(sid)
    files.mkdir(parents=True)
    (files / "upload.txt").write_text("x")
    assert api.delete(f"/sessions/{sid}").json() == {"ok": True}
    assert not files.exists()
    assert api.get(f"/sessions/{sid}").status_code == 404


def test_bad_payloads_are_explained(api) -> None:
    sid = api.post("/sessions").json()["session_id"]
    resp = api.patch(f"/sessions/{sid}/pin", {"pinned": "perhaps"})
    assert resp.status_code == 422 and "pinned" in resp.json()["detail"]
    resp = api.patch(f"/sessions/{sid}", {"title": "x" * 500})
    assert resp.status_code == 422 and "title" in resp.json()["detail"]
    assert api.get("/sessions?limit=0").status_code == 422


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("get", "", None),
        ("get", "/context", None),
        ("patch", "/pin", {"pinned": True}),
        ("patch", "", {"title": "mine now"}),
        ("delete", "", None),
    ],
)
def test_another_users_session_is_not_found_on_every_endpoint(api, other_api, method, suffix, body) -> None:
    sid = api.post("/sessions", {"title": "private"}).json()["session_id"]
    call = getattr(other_api, method)
    resp = call(f"/sessions/{sid}{suffix}", body) if body is not None else call(f"/sessions/{sid}{suffix}")
    unknown = call(f"/sessions/{uuid.uuid4()}{suffix}", body) if body is not None else call(f"/sessions/{uuid.uuid4()}{suffix}")
    assert resp.status_code == unknown.status_code == 404
    assert "not found" in resp.json()["detail"]
    session = Session.objects.get(pk=sid)
    assert session.title == "private" and session.pinned is False


def test_malformed_session_id_is_not_found(api) -> None:
    assert api.get("/sessions/not-a-uuid").status_code == 404


def test_append_does_not_rewrite_earlier_rows(api) -> None:
    sid = api.post("/sessions").json()["session_id"]
    first = services.message_append(session_id=sid, role="user", content="first")
    before = Message.objects.filter(pk=first.pk).values().get()
    for i in range(20):
        services.message_append(session_id=sid, role="assistant", content=str(i))
    assert Message.objects.filter(pk=first.pk).values().get() == before
    assert list(Message.objects.filter(session_id=sid).values_list("seq", flat=True)) == list(range(1, 22))


def test_default_profiles_exist_with_real_prompts_and_tools(api) -> None:
    profiles = {p["id"]: p for p in api.get("/agents/profiles").json()}
    assert set(profiles) >= {"secretary", "server_admin", "smart_home"}
    assert "terminal" in profiles["server_admin"]["enabled_tools"]
    assert "web_search" in profiles["secretary"]["enabled_tools"]
    assert profiles["smart_home"]["scratchpad_sections"] == ["state", "config", "errors"]
    assert profiles["server_admin"]["temperature"] == 0.2
    from profiles_app.models import AgentProfile

    assert len(AgentProfile.objects.get(pk="secretary").system_prompt) > 400
