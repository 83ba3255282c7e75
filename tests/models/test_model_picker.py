"""The model picker's server side against the fake Ollama over real HTTP: the list with sizes and
capabilities, a session's own model (used by its turns, shown with the session, refused when the server
does not have it), and the bad input of model names."""
from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from local_models.servers import ModelNameError, clean_model_name, reset_cache
from tests.fakes.fake_llm import FakeLLMServer
from tests.support.agent_env import AgentEnv
from tests.support.live import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def servers(settings: Any, fake_ollama: FakeLLMServer) -> FakeLLMServer:
    settings.OLLAMA_HOST = fake_ollama.url
    settings.OPENAI_BASE_URL = fake_ollama.openai_url
    settings.OLLAMA_DEFAULT_MODEL = "qwen3:4b"
    reset_cache()
    fake_ollama.add_model("qwen3:4b", size=2_497_293_918, parameter_size="4.0B", quantization="Q4_K_M",
                          family="qwen3", capabilities=["completion", "tools", "thinking"])
    fake_ollama.add_model("llava:7b", size=4_733_363_377, parameter_size="7B", quantization="Q4_0",
                          family="llama", capabilities=["completion", "vision"])
    return fake_ollama


def test_the_list_has_both_servers_with_size_and_capabilities(api: Any, servers: FakeLLMServer) -> None:
    body = api.get("/models").json()
    assert body["can_pull"] is True  # alice is staff
    ollama, openai = body["servers"]
    assert (ollama["backend"], ollama["url"], ollama["reachable"], ollama["can_pull"]) == (
        "ollama", servers.url, True, True)
    assert ollama["models"] == [
        {"backend": "ollama", "name": "llava:7b", "size": 4_733_363_377, "parameter_size": "7B", "quantization": "Q4_0",
         "family": "llama", "modified_at": "2026-01-02T03:04:05.000000Z", "capabilities": ["vision"]},
        {"backend": "ollama", "name": "qwen3:4b", "size": 2_497_293_918, "parameter_size": "4.0B",
         "quantization": "Q4_K_M", "family": "qwen3", "modified_at": "2026-01-02T03:04:05.000000Z",
         "capabilities": ["tools", "thinking"]},
    ]
    assert [r.json for r in servers.requests if r.path == "/api/show"] == [{"model": "llava:7b"}, {"model": "qwen3:4b"}] \
        or sorted(r.json["model"] for r in servers.requests if r.path == "/api/show") == ["llava:7b", "qwen3:4b"]
    # The OpenAI-compatible server reports no size and no capabilities: shown as unknown, not guessed.
    assert openai["backend"] == "openai" and openai["can_pull"] is False
    assert [(m["name"], m["size"], m["capabilities"]) for m in openai["models"]] == [
        ("llava:7b", None, None), ("qwen3:4b", None, None)]
    # /api/show is asked once per model build: a second listing reuses it.
    before = len([r for r in servers.requests if r.path == "/api/show"])
    api.get("/models")
    assert len([r for r in servers.requests if r.path == "/api/show"]) == before


def test_a_server_that_is_down_is_explained_and_the_other_still_listed(api: Any, servers: FakeLLMServer,
                                                                       settings: Any) -> None:
    settings.OLLAMA_HOST = f"http://127.0.0.1:{free_port()}"
    ollama, openai = api.get("/models").json()["servers"]
    assert ollama["reachable"] is False and ollama["models"] == []
    assert ollama["error"].startswith(f"Cannot connect to the Ollama server at {settings.OLLAMA_HOST}")
    assert "Check OLLAMA_HOST" in ollama["error"]
    assert openai["reachable"] is True and len(openai["models"]) == 2


def test_non_staff_see_the_list_but_cannot_pull(other_api: Any, servers: FakeLLMServer) -> None:
    body = other_api.get("/models").json()
    assert body["can_pull"] is False and len(body["servers"][0]["models"]) == 2


def _session(api: Any) -> str:
    return str(api.post("/sessions", {"title": "Model test"}).json()["session_id"])


def test_choosing_a_model_for_a_session(api: Any, servers: FakeLLMServer) -> None:
    sid = _session(api)
    shown = api.get(f"/sessions/{sid}").json()
    assert (shown["model"], shown["model_source"]) == ("qwen3:4b", "default")
    chosen = api.put(f"/sessions/{sid}/model", {"model": "llava:7b", "backend": "ollama"})
    assert chosen.status_code == 200, chosen.content
    assert chosen.json() == {"session_id": sid, "model": "llava:7b", "model_backend": "ollama", "model_source": "session"}
    assert (api.get(f"/sessions/{sid}").json()["model"], api.get(f"/sessions/{sid}/model").json()["model_source"]) == (
        "llava:7b", "session")
    on_openai = api.put(f"/sessions/{sid}/model", {"model": "qwen3:4b", "backend": "openai"}).json()
    assert (on_openai["model"], on_openai["model_backend"]) == ("qwen3:4b", "openai")
    back = api.put(f"/sessions/{sid}/model", {"model": ""}).json()
    assert (back["model"], back["model_source"]) == ("qwen3:4b", "default")


def test_without_a_choice_the_session_uses_its_profiles_model(api: Any, servers: FakeLLMServer) -> None:
    from profiles_app.models import AgentProfile
    from sessions_app.models import Session

    sid = _session(api)
    AgentProfile.objects.filter(pk=Session.objects.get(pk=sid).profile_id).update(model="llava:7b", llm_backend="ollama")
    shown = api.get(f"/sessions/{sid}/model").json()
    assert (shown["model"], shown["model_source"]) == ("llava:7b", "profile")
    assert api.put(f"/sessions/{sid}/model", {"model": "qwen3:4b"}).json()["model_source"] == "session"
    back = api.put(f"/sessions/{sid}/model", {"model": ""}).json()
    assert (back["model"], back["model_backend"], back["model_source"]) == ("llava:7b", "ollama", "profile")


@pytest.mark.parametrize(("model", "backend", "status", "says"), [
    ("gpt-oss:120b", "ollama", 400, "The Ollama server at {url} has no model 'gpt-oss:120b'. Choose one it lists or pull it first"),
    ("qwen3 4b", "ollama", 400, "'qwen3 4b' contains spaces: a model name has none"),
    ("http://evil.example/qwen3", "ollama", 400, "'http://evil.example/qwen3' is a URL, not a model name"),
    ("qwen3;rm -rf", "ollama", 400, "contains spaces"),
    ("../../etc/passwd", "ollama", 400, "is not a model name"),
    ("qwen3:4b", "anthropic", 400, "Unknown model server 'anthropic': use 'ollama' or 'openai'."),
    ("x" * 1001, "ollama", 422, "model"),
])
def test_bad_choices_are_refused_and_the_old_choice_kept(api: Any, servers: FakeLLMServer, model: str, backend: str,
                                                          status: int, says: str) -> None:
    sid = _session(api)
    api.put(f"/sessions/{sid}/model", {"model": "llava:7b"})
    response = api.put(f"/sessions/{sid}/model", {"model": model, "backend": backend})
    assert response.status_code == status, response.content
    assert says.format(url=servers.url) in response.json()["detail"]
    assert api.get(f"/sessions/{sid}").json()["model"] == "llava:7b"


def test_choosing_when_the_server_is_down_says_so(api: Any, servers: FakeLLMServer, settings: Any) -> None:
    sid = _session(api)
    settings.OLLAMA_HOST = f"http://127.0.0.1:{free_port()}"
    response = api.put(f"/sessions/{sid}/model", {"model": "qwen3:4b"})
    assert response.status_code == 502
    assert response.json()["detail"].startswith("Cannot check the model: Cannot connect to the Ollama server")


def test_another_users_session_model_is_not_found(api: Any, other_api: Any, servers: FakeLLMServer) -> None:
    sid = _session(api)
    assert other_api.put(f"/sessions/{sid}/model", {"model": "qwen3:4b"}).status_code == 404
    assert other_api.get(f"/sessions/{sid}/model").status_code == 404
    assert api.get(f"/sessions/{sid}").json()["model_source"] == "default"


@pytest.mark.parametrize(("raw", "ok"), [
    ("qwen3:4b", True), ("llama3", True), ("library/llama3:8b-instruct-q4_K_M", True),
    ("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", True),
    ("", False), ("  ", False), ("qwen3 4b", False), ("https://ollama.com/library/qwen3", False),
    ("ftp://x", False), ("www.example.com/model", False), ("a/b/c/d", False), ("-rf", False), ("q:", False),
])
def test_model_names(raw: str, ok: bool) -> None:
    if ok:
        assert clean_model_name(raw) == raw
    else:
        with pytest.raises(ModelNameError):
            clean_model_name(raw)


async def test_the_loop_uses_the_sessions_model(agent_env: AgentEnv, settings: Any) -> None:
    from local_models.choice import session_model_set
    from sessions_app.models import Session

    settings.OPENAI_BASE_URL = agent_env.fake.openai_url
    fake = agent_env.fake
    fake.add_model("fake-model")
    fake.add_model("picked:1b", capabilities=["completion"])
    session = await sync_to_async(Session.objects.select_related("profile").get)(pk=agent_env.session_id)
    await agent_env.run("first")
    assert fake.last_chat.json["model"] == "fake-model"  # the profile's (OLLAMA_DEFAULT_MODEL)
    await session_model_set(session=session, model="picked:1b", backend="ollama")
    events = await agent_env.run("second")
    assert events[-1]["type"] == "stream_end"
    assert fake.last_chat.path == "/api/chat" and fake.last_chat.json["model"] == "picked:1b"
    assert "tools" not in fake.last_chat.json  # the chosen model's capabilities count: it has no tools
    await session_model_set(session=session, model="picked:1b", backend="openai")
    await agent_env.run("third")
    assert fake.last_chat.path == "/v1/chat/completions" and fake.last_chat.json["model"] == "picked:1b"
    await session_model_set(session=session, model="", backend="")
    await agent_env.run("fourth")
    assert fake.last_chat.path == "/api/chat" and fake.last_chat.json["model"] == "fake-model"


async def test_a_pull_from_an_unreachable_server_says_where_and_what_to_check(settings: Any) -> None:
    from local_models.pull import pull_events

    settings.OLLAMA_HOST = f"http://127.0.0.1:{free_port()}"
    events = [e async for e in pull_events("qwen3:4b")]
    assert [e["type"] for e in events] == ["start", "error"]
    assert events[1]["message"].startswith(f"Pulling 'qwen3:4b' failed: cannot connect to the Ollama server at "
                                           f"{settings.OLLAMA_HOST}/api/pull")
    assert "Check OLLAMA_HOST" in events[1]["message"]
