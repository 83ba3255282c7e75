"""GET /health tells the truth: ok, degraded (a model server or a profile's model is missing) or
error (database, broker or channel layer down), naming the part and why, each probe bounded."""
from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from profiles_app.default_profiles import install
from profiles_app.models import AgentProfile

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _profiles(db: Any) -> None:
    if not AgentProfile.objects.exists():
        install(AgentProfile)


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A server that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def _get(client: Any, path: str = "/health") -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    resp = client.get(path)
    return resp.status_code, resp.json(), time.monotonic() - started


def test_all_parts_there_is_ok(client, settings, fake_ollama) -> None:
    settings.OLLAMA_HOST = fake_ollama.url
    status, body, _ = _get(client)
    assert (status, body["status"], body["problems"]) == (200, "ok", [])
    models = {m["model"]: m for m in body["llm"]["models"]}
    assert models[settings.OLLAMA_DEFAULT_MODEL]["ok"] is True
    assert set(models[settings.OLLAMA_DEFAULT_MODEL]["profiles"]) >= {"secretary"}


def test_unreachable_model_server_is_degraded_and_bounded(client, settings, black_hole) -> None:
    settings.OLLAMA_HOST = black_hole
    status, body, elapsed = _get(client)
    assert status == 200 and body["status"] == "degraded"
    [problem] = body["problems"]
    assert problem["part"] == "model server (ollama)"
    assert black_hole in problem["reason"] and "OLLAMA_HOST" in problem["reason"]
    assert elapsed < 4.0  # a black hole costs the probe's own timeout, not the client's
    status, body, _ = _get(client, "/health?strict=1")
    assert status == 503 and body["status"] == "degraded"


def test_missing_model_of_an_active_profile_is_degraded(client, settings, fake_ollama) -> None:
    settings.OLLAMA_HOST = fake_ollama.url
    AgentProfile.objects.filter(id="secretary").update(model="no-such-model:7b")
    fake_ollama.known_models = {settings.OLLAMA_DEFAULT_MODEL}
    status, body, _ = _get(client)
    assert status == 200 and body["status"] == "degraded"
    [problem] = body["problems"]
    assert problem["part"] == "model no-such-model:7b"
    assert "ollama pull no-such-model:7b" in problem["reason"] and "secretary" in problem["reason"]
    AgentProfile.objects.filter(id="secretary").update(is_active=False)  # inactive profiles do not count
    status, body, _ = _get(client, "/health?strict=1")
    assert (status, body["status"]) == (200, "ok")


def test_openai_profile_checks_its_own_server(client, settings, fake_ollama, black_hole) -> None:
    settings.OLLAMA_HOST = fake_ollama.url
    settings.OPENAI_BASE_URL = black_hole + "/v1"
    AgentProfile.objects.filter(id="secretary").update(llm_backend="openai")
    status, body, _ = _get(client)
    assert body["status"] == "degraded"
    assert [p["part"] for p in body["problems"]] == ["model server (openai)"]
    assert "OPENAI_BASE_URL" in body["problems"][0]["reason"]


def test_broker_and_layer_down_is_an_error(client, settings, fake_ollama) -> None:
    settings.OLLAMA_HOST = fake_ollama.url
    settings.NAVI_MODE, settings.REDIS_URL = "scale-out", "redis://127.0.0.1:1/0"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "x", "CONFIG": {"hosts": [{"address": "redis://127.0.0.1:1/0"}]}}}
    status, body, elapsed = _get(client)
    assert status == 503 and body["status"] == "error"
    assert [p["part"] for p in body["problems"]] == ["broker", "channel_layer"]
    assert "Redis at redis://127.0.0.1:1/0" in body["problems"][0]["reason"]
    assert elapsed < 4.0


def test_database_down_is_an_error(client, settings, fake_ollama, tmp_path) -> None:
    settings.OLLAMA_HOST = fake_ollama.url
    connection.close()
    saved = dict(connection.settings_dict)
    # A database that cannot be opened: a file in a missing directory / a database that does not exist.
    gone = str(tmp_path / "missing" / "navi.db") if connection.vendor == "sqlite" else "navi_no_such_database"
    connection.settings_dict["NAME"] = gone
    try:
        status, body, _ = _get(client)
    finally:
        connection.close()
        connection.settings_dict.update(saved)
    assert status == 503 and body["status"] == "error"
    assert body["problems"][0]["part"] == "database" and "DATABASE_URL" in body["problems"][0]["reason"]
