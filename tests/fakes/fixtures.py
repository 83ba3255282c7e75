"""Pytest fixtures for the fake model server.

Import them into a conftest or test module::

    from tests.fakes.fixtures import fake_ollama  # noqa: F401

One server per process (started on first use); each test gets it reset.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.fake_llm import FakeLLMServer, shared_server

__all__ = ["fake_llm_server", "fake_ollama", "fake_openai"]


@pytest.fixture
def fake_ollama() -> Iterator[FakeLLMServer]:
    """The fake server, reset for this test; ``.url`` is its OLLAMA_HOST."""
    server = shared_server()
    server.reset()
    yield server
    server.reset()


@pytest.fixture
def fake_openai() -> Iterator[FakeLLMServer]:
    """The same server; ``.openai_url`` is its OPENAI_BASE_URL (``/v1/chat/completions``)."""
    server = shared_server()
    server.reset()
    yield server
    server.reset()


@pytest.fixture(scope="session")
def fake_llm_server() -> FakeLLMServer:
    """The same process-wide server for session-scoped users (``live_navi`` points OLLAMA_HOST at it);
    tests that script it use ``fake_ollama``, which resets it per test."""
    return shared_server()
