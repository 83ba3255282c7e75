"""Bad input: every rejected frame gets an error event a person can act on, the connection stays
open, and nothing is saved. REST: unknown / foreign sessions, CSRF, oversized uploads."""
from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.events import StreamEnd
from sessions_app.runs import RunRegistry, set_run_registry
from tests.support.users import PASSWORD
from tests.transport.helpers import connect, drain, make_session, receive_until, scripted

pytestmark = pytest.mark.django_db(transaction=True)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32).decode()


@pytest.fixture
def registry() -> Any:
    reg = RunRegistry(turn=scripted(StreamEnd(content="ok")))
    set_run_registry(reg)
    yield reg
    set_run_registry(None)


async def _messages(sid: str) -> int:
    from sessions_app.models import Message

    return await sync_to_async(Message.objects.filter(session_id=sid).count)()


BAD = [
    ("text", "{not json", "not valid JSON"),
    ("text", "[1, 2]", "JSON object"),
    ("bytes", b"\x00\x01", "Binary frames are not supported"),
    ("text", '{"type": "dance"}', "Unknown frame type 'dance'"),
    ("text", '{"content": "hi"}', "Unknown frame type"),
    ("text", '{"type": "message"}', "content: is required"),
    ("text", '{"type": "message", "content": "   "}', "the message is empty"),
    ("text", '{"type": "message", "content": 42}', "content"),
    ("text", json.dumps({"type": "message", "content": "x" * 100_001}), "content"),
    ("text", json.dumps({"type": "message", "content": "x" * (5 * 1024 * 1024)}), "too large"),
    ("text", json.dumps({"type": "message", "content": "hi", "images": ["not base64!!"]}), "not valid base64"),
    ("text", json.dumps({"type": "message", "content": "hi", "images": [base64.b64encode(b"hello").decode()]}),
     "is not an image"),
    ("text", json.dumps({"type": "message", "content": "hi", "images": [PNG] * 9}), "images"),
    ("text", json.dumps({"type": "message", "content": "hi", "files": ["no-such-file"]}),
     "not an upload of this session"),
    ("text", json.dumps({"type": "message", "content": "hi", "files": [{"name": "p", "path": "/etc/passwd"}]}),
     "not an upload of this session"),
]


@pytest.mark.parametrize(("kind", "frame", "expected"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
async def test_bad_frame_gets_an_error_and_the_connection_stays_open(registry: Any, kind: str, frame: Any,
                                                                      expected: str) -> None:
    sid, token, _ = await make_session()
    comm = await connect(sid, token)
    await drain(comm)
    if kind == "bytes":
        await comm.send_to(bytes_data=frame)
    else:
        await comm.send_to(text_data=frame)
    events = await drain(comm)
    assert len(events) == 1 and events[0]["type"] == "error" and expected in events[0]["message"], events
    assert await _messages(sid) == 0
    # still open and working
    await comm.send_json_to({"type": "message", "content": "now a good one"})
    assert [e["type"] for e in await receive_until(comm, "session_sync")][-2:] == ["stream_end", "session_sync"]
    await comm.disconnect()


async def test_data_uri_image_is_accepted_and_stripped(registry: Any) -> None:
    sid, token, _ = await make_session()
    seen: dict[str, Any] = {}

    async def turn(session_id: str, text: str, **kw: Any) -> Any:
        seen.update(kw)
        yield StreamEnd(content="ok")

    registry.turn = turn
    comm = await connect(sid, token)
    await drain(comm)
    await comm.send_json_to({"type": "message", "content": "look", "images": ["data:image/png;base64," + PNG]})
    await receive_until(comm, "session_sync")
    assert seen["images"] == (PNG,)
    await comm.disconnect()


async def test_a_flood_of_frames_is_rate_limited_with_one_error(registry: Any) -> None:
    sid, token, _ = await make_session()
    comm = await connect(sid, token)
    await drain(comm)
    for _ in range(200):
        await comm.send_to(text_data='{"type": "stop"}')
    events = await drain(comm, quiet=0.5)
    assert [e["type"] for e in events] == ["error"] and "Too many frames" in events[0]["message"]
    import asyncio

    await asyncio.sleep(1.0)
    await comm.send_json_to({"type": "message", "content": "after the flood"})
    assert (await receive_until(comm, "session_sync"))[-2]["type"] == "stream_end"
    await comm.disconnect()


# -- REST -----------------------------------------------------------------------------------


def test_unknown_and_foreign_sessions_are_404(api: Any, other_api: Any, user: Any) -> None:
    from sessions_app import services

    sid = str(services.session_create(owner=user).id)
    for path in ("/stop", "/messages", "/files"):
        for client, target in ((api, "00000000-0000-0000-0000-000000000000"), (other_api, sid), (api, "nope")):
            resp = client.post(f"/sessions/{target}{path}", json={"content": "hi"})
            assert resp.status_code == 404 and "not found" in resp.json()["detail"], (path, resp.content)
    assert other_api.get(f"/sessions/{sid}/files").status_code == 404


def test_cookie_post_without_csrf_is_refused(user: Any) -> None:
    from django.test import Client

    from sessions_app import services

    sid = str(services.session_create(owner=user).id)
    client = Client(enforce_csrf_checks=True)
    client.login(username=user.username, password=PASSWORD)
    for path in ("stop", "messages"):
        resp = client.post(f"/sessions/{sid}/{path}", data={"content": "hi"}, content_type="application/json")
        assert resp.status_code == 403 and "CSRF" in resp.json()["detail"]
    resp = client.post(f"/sessions/{sid}/files", data={"file": _file(b"abc")})
    assert resp.status_code == 403
    assert not list((services.session_files_dir(sid)).glob("uploads/*"))


def _file(data: bytes) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("a.txt", data, content_type="text/plain")


def test_upload_limits_and_listing(api: Any, user: Any, settings: Any) -> None:
    from sessions_app import services
    from sessions_app.models import SessionFile

    settings.SESSION_FILES_MAX_SIZE_MB = 1
    sid = str(services.session_create(owner=user).id)
    resp = api.client.post(f"/sessions/{sid}/files", data={"file": _file(b"x" * (2 * 1024 * 1024))})
    assert resp.status_code == 413 and "1 MB" in resp.json()["detail"]
    assert SessionFile.objects.count() == 0
    assert not [p for p in settings.SESSION_FILES_DIR.rglob("*") if p.is_file()]  # nothing left on disk
    resp = api.client.post(f"/sessions/{sid}/files", data={"file": _file(b"hello")})
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["name"] == "a.txt" and body["size"] == 5 and body["path"].startswith(str(settings.SESSION_FILES_DIR))
    resp = api.client.post(f"/sessions/{sid}/files", data={})
    assert resp.status_code == 400 and "field named 'file'" in resp.json()["detail"]
    assert [f["id"] for f in api.get(f"/sessions/{sid}/files").json()] == [body["id"]]


def test_uploads_expire(api: Any, user: Any) -> None:
    from datetime import timedelta
    from pathlib import Path

    from django.core.management import call_command
    from django.utils import timezone

    from sessions_app import services
    from sessions_app.models import SessionFile

    sid = str(services.session_create(owner=user).id)
    body = api.client.post(f"/sessions/{sid}/files", data={"file": _file(b"old")}).json()
    SessionFile.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api.get(f"/sessions/{sid}/files").json() == []
    call_command("purge_session_files")
    assert SessionFile.objects.count() == 0 and not Path(body["path"]).exists()


def test_sanitised_names() -> None:
    from sessions_app.files import sanitize_name

    assert sanitize_name("../../etc/passwd") == "passwd"
    assert sanitize_name("my report (final).pdf") == "my_report_final_.pdf"
    assert sanitize_name("..") == "file"
    assert "/" not in sanitize_name("a\\b/c;rm -rf.txt")
