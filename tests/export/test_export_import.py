"""Export (Markdown, JSON, HTML; streamed) and import of Navi's own JSON export, in both tiers:
round trips, ownership, and every kind of bad import refused with nothing created."""
from __future__ import annotations

import json
import re

import pytest

from sessions_app import services
from sessions_app.models import Message, Session

pytestmark = pytest.mark.django_db

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def _conversation(owner):
    session = services.session_create(owner=owner, title="NAS backup ✓")
    add = services.message_append
    add(session_id=session.id, role="user", content="Check the **backup** <script>window.x=1</script>",
        images=[PNG_1PX])
    add(session_id=session.id, role="assistant", content="1. Look at the log\n2. Report", is_plan=True)
    add(session_id=session.id, role="assistant", content=None, thinking="I should run ls",
        tool_calls=[{"id": "c1", "name": "terminal", "arguments": {"command": "ls ```x```"}}])
    add(session_id=session.id, role="tool", content="backup.tar 02:00\n```not a fence end", name="terminal",
        tool_call_id="c1")
    add(session_id=session.id, role="assistant", content="The backup ran at 02:00. [link](javascript:alert(1))")
    add(session_id=session.id, role="assistant", content="internal note", buffer=Message.Buffer.CONTEXT)
    return session


def _body(resp) -> bytes:
    return b"".join(resp.streaming_content)


def test_json_export_is_the_display_history_with_plan_and_tool_calls(api, user) -> None:
    session = _conversation(user)
    resp = api.get(f"/sessions/{session.id}/export?format=json")
    assert resp.status_code == 200 and resp.streaming
    assert resp["Content-Type"] == "application/json; charset=utf-8"
    assert resp["Content-Disposition"] == f'attachment; filename="navi-nas-backup-{str(session.id)[:8]}.json"'
    doc = json.loads(_body(resp))
    assert (doc["format"], doc["version"]) == ("navi.session", 1)
    assert doc["session"]["title"] == "NAS backup ✓" and doc["session"]["id"] == str(session.id)
    assert doc["plan"] == {"todo": []}
    assert doc["last_turn"] == {"available": True, "events": []}
    assert [(m["seq"], m["role"]) for m in doc["messages"]] == [
        (1, "user"), (2, "assistant"), (3, "assistant"), (4, "tool"), (5, "assistant")]  # not the context-only row
    assert doc["messages"][1]["is_plan"] is True
    assert doc["messages"][2]["tool_calls"] == [{"id": "c1", "name": "terminal", "arguments": {"command": "ls ```x```"}}]
    assert doc["messages"][2]["thinking"] == "I should run ls"
    assert doc["messages"][3]["name"] == "terminal" and doc["messages"][0]["images"] == [PNG_1PX]


def test_markdown_export_reads_as_the_conversation(api, user) -> None:
    session = _conversation(user)
    text = _body(api.get(f"/sessions/{session.id}/export?format=md")).decode()
    assert text.startswith("# NAS backup ✓\n\n*Exported from Navi on ")
    assert "### You · " in text and "Check the **backup** <script>" in text
    assert "### Plan · " in text and "1. Look at the log" in text
    assert "**Tool call** `terminal`\n\n```json\n{\n \"command\": \"ls ```x```\"\n}\n```" not in text  # fence must be longer
    assert "````json\n{\n \"command\": \"ls ```x```\"\n}\n````" in text
    assert "**Tool result** `terminal`" in text and "````\nbackup.tar 02:00\n```not a fence end\n````" in text
    assert "The backup ran at 02:00." in text and "internal note" not in text


def test_html_export_is_self_contained_and_inert(api, user) -> None:
    session = _conversation(user)
    resp = api.get(f"/sessions/{session.id}/export?format=html")
    assert resp["Content-Type"] == "text/html; charset=utf-8"
    html = _body(resp).decode()
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    assert "default-src 'none'; img-src data:" in html
    assert "<script" not in html and not re.search(r"<[^>]+(?:href|src)=\"\s*javascript:", html)
    assert "[link](javascript:alert(1))" in html  # an unsafe link stays text
    assert "&lt;script&gt;window.x=1&lt;/script&gt;" in html
    assert "<strong>backup</strong>" in html  # Markdown rendered
    assert f'src="data:image/png;base64,{PNG_1PX}"' in html
    # No external asset: every src/href is a data: URI or an in-page anchor.
    assert all(u.startswith(("data:", "#")) for u in re.findall(r'(?:src|href)="([^"]*)"', html))
    assert "<title>NAS backup ✓ · Navi</title>" in html


def test_export_of_another_users_session_is_404(api, other_api, user) -> None:
    session = _conversation(user)
    for fmt in ("md", "json", "html"):
        resp = other_api.get(f"/sessions/{session.id}/export?format={fmt}")
        assert resp.status_code == 404 and resp.json()["detail"] == f"Session {session.id} not found."
    assert api.get(f"/sessions/{session.id}/export?format=pdf").status_code == 422


def test_json_round_trip_creates_a_new_session(api, user) -> None:
    session = _conversation(user)
    raw = _body(api.get(f"/sessions/{session.id}/export?format=json"))
    resp = api.client.post("/sessions/import", data=raw, content_type="application/json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["title"] == "NAS backup ✓" and body["messages"] == 5 and body["session_id"] != str(session.id)
    new = Session.objects.get(pk=body["session_id"])
    assert new.owner == user and new.next_seq == 6
    again = json.loads(_body(api.get(f"/sessions/{new.id}/export?format=json")))
    before = json.loads(raw)
    strip = lambda ms: [{k: v for k, v in m.items() if k != "metadata"} for m in ms]  # noqa: E731
    assert strip(again["messages"]) == strip(before["messages"])
    assert all(m["metadata"].get("imported") is True for m in again["messages"])
    # Imported messages are searchable at once.
    assert {r["session_id"] for r in api.get("/search?q=backup").json()["results"]} == {str(session.id), str(new.id)}


def _import(api, raw: bytes | str):
    return api.client.post("/sessions/import", data=raw, content_type="application/json")


def _counts():
    return Session.objects.count(), Message.objects.count()


@pytest.mark.parametrize(("raw", "detail"), [
    (b"", "The import is empty: send the JSON file of a Navi export (format=json)."),
    (b"{\"format\": \"navi.session\", ", "The file is not valid JSON"),
    (b"[1, 2, 3]", "This is not a Navi conversation export (\"format\" is 'list', expected 'navi.session')"),
    (json.dumps({"format": "chatgpt", "conversations": []}).encode(),
     "This is not a Navi conversation export (\"format\" is 'chatgpt', expected 'navi.session')"),
    (json.dumps({"title": "x", "mapping": {}}).encode(),
     "This is not a Navi conversation export (\"format\" is None, expected 'navi.session')"),
    (json.dumps({"format": "navi.session", "version": 2, "session": {}, "messages": []}).encode(),
     "This export has version 2; this Navi imports version 1."),
    (json.dumps({"format": "navi.session", "version": 1, "session": {"title": "t"},
                 "messages": [{"role": "user", "content": "ok"}, {"role": "wizard", "content": "x"}]}).encode(),
     "The export is damaged: messages.1.role: Input should be 'user', 'assistant', 'tool' or 'system'."),
    (json.dumps({"format": "navi.session", "version": 1, "session": {"title": "t"}}).encode(),
     "The export is damaged: messages: Field required."),
    (json.dumps({"format": "navi.session", "version": 1, "session": {"title": "t" * 300}, "messages": []}).encode(),
     "The export is damaged: session.title: String should have at most 200 characters."),
])
def test_bad_imports_are_refused_with_a_clear_message_and_create_nothing(api, user, raw, detail) -> None:
    _conversation(user)
    before = _counts()
    resp = _import(api, raw)
    assert resp.status_code == 400, resp.content
    assert resp.json()["detail"].startswith(detail)
    assert _counts() == before


def test_an_oversized_import_is_refused_before_it_is_read(api, user, settings) -> None:
    settings.SESSION_IMPORT_MAX_MB = 1
    before = _counts()
    doc = {"format": "navi.session", "version": 1, "session": {"title": "big"},
           "messages": [{"role": "user", "content": "x" * 1000}] * 1200}
    resp = _import(api, json.dumps(doc))
    assert resp.status_code == 413
    assert resp.json()["detail"] == ("The file is too large to import (more than 1 MB): split the conversation or "
                                     "raise SESSION_IMPORT_MAX_MB.")
    assert _counts() == before


def test_a_failure_while_writing_leaves_nothing_half_created(api, user) -> None:
    """The whole import is one transaction: a row the database refuses undoes the session too."""
    from django.db import connection

    doc = {"format": "navi.session", "version": 1, "session": {"title": "half"},
           "messages": [{"role": "user", "content": f"m{i}"} for i in range(1200)]}
    before = _counts()
    # A database-level refusal of the 1000th row (past the first bulk batch), whatever the tier.
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("CREATE TRIGGER refuse_m999 BEFORE INSERT ON sessions_app_message "
                           "WHEN new.content = 'm999' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        else:
            cursor.execute("ALTER TABLE sessions_app_message ADD CONSTRAINT refuse_m999 CHECK (content <> 'm999')")
    api.client.raise_request_exception = False
    resp = _import(api, json.dumps(doc))
    assert resp.status_code == 500
    assert _counts() == before
    assert not Session.objects.filter(title="half").exists()


def test_import_needs_authentication(client) -> None:
    assert client.post("/sessions/import", data=b"{}", content_type="application/json").status_code == 401


def test_export_sessions_command_writes_importable_files(user, tmp_path) -> None:
    from django.core.management import call_command

    session = _conversation(user)
    services.session_create(owner=user, title="")
    out = tmp_path / "backup"
    call_command("export_sessions", user="alice", format="json", out=str(out))
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 2 and f"navi-nas-backup-{str(session.id)[:8]}.json" in files
    doc = json.loads((out / f"navi-nas-backup-{str(session.id)[:8]}.json").read_text())
    assert [m["seq"] for m in doc["messages"]] == [1, 2, 3, 4, 5]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("export_sessions", user="nobody")


@pytest.mark.django_db(transaction=True)
async def test_a_long_export_streams_page_by_page_under_asgi(user) -> None:
    """Through Django's ASGI handler (what daphne runs) the body is an async iterator that reads
    and renders one page of messages at a time, never the whole session."""
    from asgiref.sync import sync_to_async
    from django.test import AsyncClient

    from sessions_app.export.reader import PAGE

    def seed() -> Session:
        session = services.session_create(owner=user, title="long")
        Message.objects.bulk_create([Message(session=session, seq=i, role="user", content=f"line {i}")
                                     for i in range(1, 2 * PAGE + 51)])
        Session.objects.filter(pk=session.pk).update(next_seq=2 * PAGE + 51)
        return session

    session = await sync_to_async(seed)()
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    resp = await client.get(f"/sessions/{session.id}/export", {"format": "json"})
    assert resp.status_code == 200 and resp.streaming and resp.is_async
    chunks = [chunk async for chunk in resp.streaming_content]
    assert len(chunks) == 1 + 3 + 1  # head, three pages, tail
    doc = json.loads(b"".join(chunks))
    assert [m["seq"] for m in doc["messages"]] == list(range(1, 2 * PAGE + 51))


@pytest.mark.django_db(transaction=True)
async def test_the_served_export_streams_too_not_rendered_whole_first(user) -> None:
    """As served (navi_site.asgi: a sync view's request is handled whole in a worker thread, SyncRequests), the
    export was an async iterator that the thread could only read to its end before sending anything (Django warned
    "StreamingHttpResponse must consume asynchronous iterators"): the whole session rendered in memory first."""
    import asyncio
    import warnings

    from asgiref.sync import sync_to_async

    from navi_site.asgi import application
    from sessions_app.export.reader import PAGE
    from tests.support.users import token_for

    def seed() -> tuple[Session, str]:
        session = services.session_create(owner=user, title="long")
        Message.objects.bulk_create([Message(session=session, seq=i, role="user", content=f"line {i}")
                                     for i in range(1, 2 * PAGE + 51)])
        Session.objects.filter(pk=session.pk).update(next_seq=2 * PAGE + 51)
        return session, token_for(user)

    session, token = await sync_to_async(seed)()
    path = f"/sessions/{session.id}/export"
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"format=json",
             "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {token}".encode())],
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        await application(scope, _first(receive), send)
    assert not [w for w in seen if "iterators" in str(w.message)], [str(w.message) for w in seen]
    assert sent[0]["status"] == 200
    parts = [m["body"] for m in sent[1:] if m.get("body")]
    assert len(parts) == 1 + 3 + 1  # head, three pages, tail: sent as each was rendered
    doc = json.loads(b"".join(parts))
    assert [m["seq"] for m in doc["messages"]] == list(range(1, 2 * PAGE + 51))


def _first(then):
    """An ASGI receive: the request (no body), then ``then``."""
    given = []

    async def receive() -> dict:
        if not given:
            given.append(True)
            return {"type": "http.request", "body": b""}
        return await then()
    return receive


def test_an_imported_edited_exchange_is_one_version_and_the_plan_comes_back(api, user) -> None:
    """The export holds the shown version of an edited exchange; its metadata named the other
    versions by their old numbers. The copy is renumbered, so it has one version, no switcher, and
    can be edited again; the plan's todo list comes back with each step's status."""
    from agent import ports

    session = services.session_create(owner=user, title="Edited")
    add = services.message_append
    add(session_id=session.id, role="user", content="What is 2+2?")
    for _ in range(2):  # rows the export leaves out: the copy's numbers shift
        add(session_id=session.id, role="assistant", content="internal", buffer=Message.Buffer.CONTEXT)
    add(session_id=session.id, role="assistant", content="Four.")
    add(session_id=session.id, role="user", content="And in French?")  # seq 5
    add(session_id=session.id, role="assistant", content="Quatre.")
    services.session_regenerate(session_id=session.id, from_seq=5)
    add(session_id=session.id, role="user", content="And in German?", metadata={"branch_group": 5})
    add(session_id=session.id, role="assistant", content="Vier.")
    add(session_id=session.id, role="user", content="Thanks")
    add(session_id=session.id, role="assistant", content="You're welcome.")
    assert api.get(f"/sessions/{session.id}").json()["messages"][2]["branch"]["count"] == 2
    ports.todo().replace(str(session.id), ["Count", "Translate"])
    ports.todo().complete_next(str(session.id), "2+2=4")

    raw = _body(api.get(f"/sessions/{session.id}/export?format=json"))
    assert [s["status"] for s in json.loads(raw)["plan"]["todo"]] == ["done", "pending"]
    body = _import(api, raw).json()
    shown = api.get(f"/sessions/{body['session_id']}").json()["messages"]
    assert [(m["seq"], m["content"]) for m in shown] == [
        (1, "What is 2+2?"), (2, "Four."), (3, "And in German?"), (4, "Vier."), (5, "Thanks"), (6, "You're welcome.")]
    assert all("branch" not in m for m in shown)
    # Regenerate the copy's last exchange (what POST …/regenerate does under the turn lock).
    copy = body["session_id"]
    group = services.branch_group(Message.objects.get(session_id=copy, seq=5))
    services.session_regenerate(session_id=copy, from_seq=5)
    add(session_id=copy, role="user", content="Thanks", metadata={"branch_group": group})
    add(session_id=copy, role="assistant", content="Gern geschehen.")
    shown = api.get(f"/sessions/{copy}").json()["messages"]
    assert [(m["content"], m.get("branch")) for m in shown if m["role"] == "user"] == [
        ("What is 2+2?", None), ("And in German?", None), ("Thanks", {"group": 5, "index": 2, "count": 2})]
    old = api.get(f"/sessions/{copy}/branches/5?index=1").json()
    assert [m["content"] for m in old["messages"]] == ["Thanks", "You're welcome."]
    assert [(s["title"], s["status"], s["validation"]) for s in ports.todo().read(body["session_id"])] == [
        ("Count", "done", "2+2=4"), ("Translate", "pending", None)]
    assert ports.todo().read(str(session.id))[0]["status"] == "done"  # the original's list is its own


def test_a_plan_of_too_many_steps_is_refused_and_nothing_is_created(api, user) -> None:
    before = _counts()
    doc = {"format": "navi.session", "version": 1, "session": {"title": "t"}, "messages": [],
           "plan": {"todo": [{"title": f"step {i}"} for i in range(51)]}}
    resp = _import(api, json.dumps(doc))
    assert resp.status_code == 400
    assert resp.json()["detail"].startswith("The export is damaged: plan.todo: List should have at most 50 items")
    assert _counts() == before
