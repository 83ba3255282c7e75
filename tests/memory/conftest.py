"""Fixtures for the memory tests: the fake Ollama server as the model, sessions with messages."""
from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.fakes.fake_llm import FakeLLMServer


@pytest.fixture
async def thread_db() -> Any:
    """For async tests: close the DB connection of the sync_to_async thread afterwards
    (PostgreSQL cannot drop the test database while it is open)."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def llm(settings: Any, fake_ollama: FakeLLMServer) -> FakeLLMServer:
    """The fake server as every profile's model; short memory call timeout."""
    settings.OLLAMA_HOST = fake_ollama.url
    settings.OLLAMA_NUM_CTX = 65536
    settings.MEMORY_IDLE_MINUTES = 30
    settings.MEMORY_LLM_TIMEOUT = 5.0
    return fake_ollama


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """Record Celery ``.delay`` calls of the memory tasks instead of sending them to a broker."""
    from memory_app import tasks

    calls: list[tuple[str, tuple[Any, ...]]] = []
    for task in (tasks.extract_session, tasks.process_stale_sessions, tasks.rebuild_summary):
        monkeypatch.setattr(task, "delay", lambda *args, _name=task.name: calls.append((_name, args)))
    yield calls


def reply_json(fake: FakeLLMServer, payload: Any) -> None:
    fake.script(text=payload if isinstance(payload, str) else json.dumps(payload))


def make_session(user: Any, turns: list[tuple[str, str]], *, idle_minutes: int = 120) -> Any:
    """A session of ``user`` with these (role, content) messages, idle for ``idle_minutes``."""
    from sessions_app.models import Session
    from sessions_app.services import message_append, session_create

    session = session_create(owner=user)
    for role, content in turns:
        message_append(session_id=session.id, role=role, content=content)
    make_idle(session, idle_minutes)
    return Session.objects.get(pk=session.pk)


def make_idle(session: Any, minutes: int = 120) -> None:
    from sessions_app.models import Session

    Session.objects.filter(pk=session.pk).update(last_active=timezone.now() - timedelta(minutes=minutes))


def add_turns(session: Any, turns: list[tuple[str, str]], **fields: Any) -> None:
    from sessions_app.services import message_append

    for role, content in turns:
        message_append(session_id=session.id, role=role, content=content, **fields)
    make_idle(session)


def chat_text(request: Any) -> str:
    """All message contents of a recorded chat request."""
    return "\n".join(m.get("content") or "" for m in request.json["messages"])


FACTS_EDITOR = {
    "facts": [
        {"category": "preferences", "key": "favourite_editor", "value": "Neovim", "confidence": 0.9},
        {"category": "environment", "key": "Home Server OS", "value": "Debian 12", "confidence": 0.8},
    ],
    "forget": [],
}
