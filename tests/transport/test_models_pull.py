"""Pulling a model through a live Navi (real HTTP both ways: browser → Navi → fake Ollama): progress
events with bytes and percent, plain errors (no such model, disk full, a refused request), cancel by
closing the request (Navi closes its connection to Ollama), and the bad input: names with spaces or
URLs, non-staff users."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.support.live import LiveNavi

GB = 1_000_000_000


def _pull(navi: LiveNavi, model: str, token: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    with httpx.stream("POST", navi.url + "/models/pull", json={"model": model}, timeout=30,
                      headers={"Authorization": f"Bearer {token or navi.token}"}) as response:
        if response.status_code != 200:
            return response.status_code, [json.loads(response.read())]
        assert response.headers["content-type"].startswith("application/x-ndjson")
        return 200, [json.loads(line) for line in response.iter_lines() if line.strip()]


def test_a_pull_streams_progress_then_done_and_the_model_is_listed(navi: LiveNavi, fake_ollama: FakeLLMServer) -> None:
    fake_ollama.add_model("fake-model")
    fake_ollama.script_pull("tinyllama:1.1b", layers=[("sha256:" + "1" * 64, 600_000_000), ("sha256:" + "2" * 64, 400)],
                            steps=3, delay=0.12)  # above PROGRESS_INTERVAL: every step is relayed
    status, events = _pull(navi, "tinyllama:1.1b")
    assert status == 200
    assert events[0] == {"type": "start", "model": "tinyllama:1.1b", "server": fake_ollama.url}
    assert events[1] == {"type": "status", "status": "pulling manifest"}
    progress = [e for e in events if e["type"] == "progress"]
    assert progress[0]["completed"] == 0 and progress[0]["total"] == 600_000_000
    assert [p["completed"] for p in progress] == sorted(p["completed"] for p in progress)  # never backwards
    assert any(0 < p["percent"] < 100 for p in progress)
    assert progress[-1] == {"type": "progress", "status": "success", "completed": 600_000_400, "total": 600_000_400,
                            "percent": 100.0}
    assert [e.get("status") for e in events if e["type"] == "status"][-2:] == ["verifying sha256 digest", "writing manifest"]
    assert events[-1] == {"type": "done", "model": "tinyllama:1.1b"}
    pulled = [r.json for r in fake_ollama.requests if r.path == "/api/pull"]
    assert pulled == [{"model": "tinyllama:1.1b", "stream": True}]
    listed = navi.request("GET", "/models")[1]["servers"][0]["models"]
    assert "tinyllama:1.1b" in [m["name"] for m in listed]


@pytest.mark.parametrize(("script", "says", "progress_first"), [
    (None, "Ollama has no model called 'nosuchmodel:7b'. Check the name and its tag on ollama.com/library", False),
    ({"error": "write /root/.ollama/models/blobs/sha256-aaa-partial: no space left on device", "error_after": 3},
     "The Ollama server ran out of disk space while pulling 'nosuchmodel:7b'. Free space on the server", True),
    ({"http_status": 500, "error": "something broke"}, "The Ollama server could not pull 'nosuchmodel:7b': something broke",
     False),
    ({"error": "pull model manifest: Get \"https://registry.ollama.ai/v2/library/x/manifests/7b\": dial tcp: "
               "lookup registry.ollama.ai: no such host"}, "The Ollama server could not download 'nosuchmodel:7b' from its registry",
     False),
])
def test_pull_errors_are_shown_plainly(navi: LiveNavi, fake_ollama: FakeLLMServer, script: dict[str, Any] | None,
                                       says: str, progress_first: bool) -> None:
    if script is not None:
        fake_ollama.script_pull("nosuchmodel:7b", layers=[("sha256:" + "3" * 64, 4 * GB)], steps=4, **script)
    status, events = _pull(navi, "nosuchmodel:7b")
    assert status == 200
    assert events[-1]["type"] == "error" and events[-1]["message"].startswith(says), events[-1]
    assert [e["type"] for e in events].count("error") == 1
    assert any(e["type"] == "progress" for e in events) is progress_first
    assert not any(e["type"] == "done" for e in events)
    assert "nosuchmodel:7b" not in [m["name"] for m in navi.request("GET", "/models")[1]["servers"][0]["models"]]


def test_closing_the_request_cancels_the_pull_on_the_server(navi: LiveNavi, fake_ollama: FakeLLMServer) -> None:
    fake_ollama.script_pull("big:70b", layers=[("sha256:" + "4" * 64, 40 * GB)], steps=200, delay=0.05)
    with httpx.stream("POST", navi.url + "/models/pull", json={"model": "big:70b"}, timeout=30,
                      headers={"Authorization": f"Bearer {navi.token}"}) as response:
        lines = response.iter_lines()
        seen = [json.loads(next(lines)) for _ in range(4)]
    assert seen[-1]["type"] == "progress" and seen[-1]["percent"] < 5
    assert fake_ollama.wait_for_sync(lambda f: f.pulls_cancelled == 1, within=5), "Navi kept pulling"
    time.sleep(0.3)
    assert fake_ollama.pulls_finished == 0
    assert "big:70b" not in (fake_ollama.known_models or set())


@pytest.mark.parametrize(("model", "says"), [
    ("qwen3 4b", "'qwen3 4b' contains spaces"),
    ("https://ollama.com/library/qwen3", "is a URL, not a model name"),
    ("", "The model name is empty"),
    ("qwen3:4b\nrm", "contains spaces"),
])
def test_bad_names_are_refused_before_anything_is_pulled(navi: LiveNavi, fake_ollama: FakeLLMServer, model: str,
                                                         says: str) -> None:
    status, body = _pull(navi, model)
    assert status == 400 and says in body[0]["detail"]
    assert not [r for r in fake_ollama.requests if r.path == "/api/pull"]


def test_non_staff_get_403_with_the_reason(navi: LiveNavi, fake_ollama: FakeLLMServer) -> None:
    code = ("from django.contrib.auth import get_user_model\n"
            "from sessions_app.models import ApiToken\n"
            "u, _ = get_user_model().objects.get_or_create(username='plainuser')\n"
            "print(ApiToken.issue(user=u)[1])\n")
    token = navi.manage("shell", "-c", code).strip().splitlines()[-1]
    fake_ollama.script_pull("qwen3:4b")
    status, body = _pull(navi, "qwen3:4b", token=token)
    assert status == 403
    assert body[0]["detail"].startswith("Only staff users can pull models: a pull downloads gigabytes")
    assert not [r for r in fake_ollama.requests if r.path == "/api/pull"]
    assert navi.request("GET", "/models", token=token)[1]["can_pull"] is False


@pytest.mark.django_db(transaction=True)
async def test_a_client_gone_while_a_part_is_on_its_way_still_stops_the_pull(fake_ollama: FakeLLMServer,
                                                                              settings: Any) -> None:
    """The client leaves while Navi waits to hand it a line (its socket is full, or the server's loop is
    busy): the request is cancelled there, between two lines, and the pull must stop all the same
    instead of downloading to the end for nobody (a loaded CI run showed it going on past 15 s)."""
    from asgiref.sync import sync_to_async

    from navi_site.asgi import application
    from tests.support.users import make_user, token_for

    settings.OLLAMA_HOST = fake_ollama.url
    token = await sync_to_async(lambda: token_for(make_user("puller", staff=True)))()
    fake_ollama.script_pull("big:70b", layers=[("sha256:" + "5" * 64, 40 * GB)], steps=200, delay=0.05)
    body = json.dumps({"model": "big:70b"}).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/models/pull", "raw_path": b"/models/pull", "root_path": "", "query_string": b"",
             "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode()), (b"authorization", f"Bearer {token}".encode())],
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    lines: list[bytes] = []
    gone, stuck = asyncio.Event(), asyncio.Event()
    incoming = [{"type": "http.request", "body": body}]

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        lines.append(message.get("body", b""))
        if b'"progress"' in message.get("body", b""):  # the first progress line: the client stops reading
            stuck.set()
            await asyncio.sleep(30)

    request = asyncio.ensure_future(application(scope, receive, send))
    await asyncio.wait_for(stuck.wait(), 10)
    gone.set()
    await asyncio.wait_for(request, 10)
    assert await asyncio.to_thread(fake_ollama.wait_for_sync, lambda f: f.pulls_cancelled == 1, 5), "Navi kept pulling"
    assert fake_ollama.pulls_finished == 0
