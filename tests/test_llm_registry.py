"""get_backend: built lazily from settings, cached per settings values, pluggable for tests."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from agent.llm import registry
from agent.llm.base import LLMBackend, LLMError
from agent.llm.ollama import OllamaBackend
from agent.llm.openai_compat import OpenAICompatBackend


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    registry.reset_backends()
    yield
    registry.reset_backends()


def test_default_is_ollama_and_cached(settings: SettingsWrapper) -> None:
    settings.OLLAMA_HOST = "http://127.0.0.1:1"
    backend = registry.get_backend("")
    assert isinstance(backend, OllamaBackend) and backend.host == "http://127.0.0.1:1"
    assert registry.get_backend("ollama") is backend
    assert isinstance(backend, LLMBackend)


def test_settings_change_gives_new_backend(settings: SettingsWrapper) -> None:
    settings.OLLAMA_HOST = "http://127.0.0.1:1"
    first = registry.get_backend("ollama")
    settings.OLLAMA_HOST = "http://127.0.0.1:2"
    second = registry.get_backend("ollama")
    assert second is not first and second.host == "http://127.0.0.1:2"  # type: ignore[attr-defined]


def test_openai(settings: SettingsWrapper) -> None:
    settings.OPENAI_BASE_URL = "http://127.0.0.1:3/v1"
    settings.OPENAI_API_KEY = "k"
    backend = registry.get_backend("OpenAI")
    assert isinstance(backend, OpenAICompatBackend) and backend.base_url == "http://127.0.0.1:3/v1"


def test_unknown_name() -> None:
    with pytest.raises(LLMError) as err:
        registry.get_backend("x")
    assert str(err.value) == "unknown llm_backend 'x': use 'ollama' or 'openai'"


def test_register_backend() -> None:
    fake = OllamaBackend("http://127.0.0.1:9")
    registry.register_backend("ollama", lambda: fake)
    assert registry.get_backend("ollama") is fake
    registry.unregister_backend("ollama")
    assert registry.get_backend("ollama") is not fake
